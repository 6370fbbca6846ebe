// The headers compile as C++ and may be included twice (include guards, cpp_compat).
#include "ctf_reader.h"
#include "ctf_reader.h"
#include "ctf_reader.hpp"
#include "ctf_reader.hpp"

#include <cstdio>
#include <cstring>
#include <string>

int main() {
    const std::string expected = std::to_string(CTF_READER_VERSION_MAJOR) + "." +
                                 std::to_string(CTF_READER_VERSION_MINOR) + "." +
                                 std::to_string(CTF_READER_VERSION_PATCH);
    if (expected != ctf_version()) {
        std::fprintf(stderr, "header version %s, library version %s\n", expected.c_str(), ctf_version());
        return 1;
    }
    std::printf("version %s\n", ctf_version());
    return 0;
}
