/* The C++ wrapper's own contracts (include/ctf_reader.hpp), beyond what c_examples/train.cpp
 * shows: every ctf::Error carries the message of the call that failed, a moved-from
 * ctf::Minibatch is empty, and an empty checkpoint is a checkpoint error. Run from the
 * repository root (it reads examples/pos.cntk); prints "N passed, M failed" last and exits
 * 1 on any failure. tests/c_api.rs runs it, and again under valgrind memcheck. */
#include "ctf_reader.hpp"

#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <utility>

#include "check.h"

namespace {

/* Runs `call`, which must throw ctf::Error with status `want`; checks that the error's text
 * is the status name and the thread's last error message (read after the throw, when it is
 * current), and that it contains `needle`. */
void expect_error(const char *what, ctf_status want, const char *needle, const std::function<void()> &call) {
    try {
        call();
        failed++;
        std::fprintf(stderr, "%s: no exception\n", what);
    } catch (const ctf::Error &e) {
        const std::string expected = std::string(ctf_status_str(want)) + ": " + ctf_last_error_message();
        const bool right = e.status() == want && expected == e.what() && std::strstr(e.what(), needle) != nullptr;
        if (right) {
            passed++;
        } else {
            failed++;
            std::fprintf(stderr, "%s: status %d, what() \"%s\", expected \"%s\" containing \"%s\"\n", what,
                         static_cast<int>(e.status()), e.what(), expected.c_str(), needle);
        }
    }
}

}  // namespace

int main() {
    /* A first failure, so that the thread's message buffer is a heap block that the next
     * failure frees: a message read before the call that fails would be read from it. */
    expect_error("config without file", CTF_STATUS_CONFIG_ERROR, "missing required parameter 'file'", [] {
        ctf::Config config;
        ctf::Reader reader(config);
    });
    expect_error("missing configuration file", CTF_STATUS_IO_ERROR, "no/such/file.cntk",
                 [] { ctf::Config::from_file("no/such/file.cntk"); });
    expect_error("BrainScript syntax error", CTF_STATUS_CONFIG_ERROR, "<text>:1:",
                 [] { ctf::Config::from_brainscript("reader = [ file = ", "reader"); });

    ctf::Reader reader = ctf::Reader::from_file("examples/pos.cntk");
    const std::size_t words = reader.find_stream("words");
    const std::size_t features = reader.find_stream("features");
    std::optional<ctf::Minibatch> first = reader.next(16);
    CHECK(first.has_value());
    if (!first) {
        std::printf("%d passed, %d failed\n", passed, failed);
        return 1;
    }
    ctf::Minibatch &mb = *first;
    expect_error("stream out of range", CTF_STATUS_INVALID_ARGUMENT, "7", [&] { mb.stream(7); });
    expect_error("padded view of a sparse stream", CTF_STATUS_INVALID_ARGUMENT, "sparse",
                 [&] { mb.padded(words); });
    expect_error("row indices of a dense stream", CTF_STATUS_INVALID_ARGUMENT, "dense",
                 [&] { mb.dlpack(features, CTF_DLPACK_PART_ROW_INDICES); });

    /* A moved-from minibatch is empty, whether moved by construction or by assignment. */
    const std::size_t sequences = mb.sequences();
    CHECK(sequences > 0);
    ctf::Minibatch taken(std::move(mb));
    CHECK(taken && taken.sequences() == sequences && taken.keys().size() == sequences);
    CHECK(!mb && mb.sequences() == 0 && mb.samples() == 0 && mb.keys().empty() && mb.stream_count() == 0);
    ctf::Minibatch assigned;
    assigned = std::move(taken);
    CHECK(assigned && assigned.sequences() == sequences);
    CHECK(!taken && taken.sequences() == 0 && taken.keys().empty() && taken.position() == 0);
    assigned = ctf::Minibatch();
    CHECK(!assigned && assigned.sequences() == 0);

    /* An empty checkpoint is malformed, like any other that is not one. */
    expect_error("empty checkpoint", CTF_STATUS_CHECKPOINT_ERROR, "checkpoint", [&] { reader.restore({}); });
    expect_error("one-byte checkpoint", CTF_STATUS_CHECKPOINT_ERROR, "checkpoint", [&] { reader.restore({1}); });
    /* The reader failed with its own message; a real checkpoint still restores it. */
    ctf::Reader fresh = ctf::Reader::from_file("examples/pos.cntk");
    std::optional<ctf::Minibatch> again = fresh.next(16);
    CHECK(again.has_value());
    const std::vector<std::uint8_t> checkpoint = fresh.checkpoint();
    reader.restore(checkpoint);
    std::optional<ctf::Minibatch> second = reader.next(16);
    std::optional<ctf::Minibatch> second_fresh = fresh.next(16);
    CHECK(second && second_fresh && second->position() == second_fresh->position());

    std::printf("%d passed, %d failed\n", passed, failed);
    return failed == 0 ? 0 : 1;
}
