// A training-loop skeleton on the C++ wrapper: two sweeps of minibatches through a range-for,
// a "model" that consumes each dense stream's padded view, a checkpoint saved after step K,
// and a resumed reader that must replay exactly the minibatches that followed it.
//
//   train CONFIG [MB_SIZE|SCHEDULE] [K]
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ctf_reader.hpp"

namespace {

// Stands for a forward pass: the mean of the valid (unpadded) values of a padded view.
double fake_loss(const ctf_padded_view &p) {
    double sum = 0;
    std::size_t count = 0;
    for (std::size_t cell = 0; cell < p.batch * p.max_len; ++cell) {
        if (p.mask[cell] == CTF_MASK_PAD) continue;
        for (std::size_t d = 0; d < p.dim; ++d) {
            std::size_t at = cell * p.dim + d;
            sum += p.element_type == CTF_ELEMENT_TYPE_FLOAT32 ? static_cast<const float *>(p.values)[at]
                                                              : static_cast<const double *>(p.values)[at];
            ++count;
        }
    }
    return count ? sum / static_cast<double>(count) : 0.0;
}

std::string join(const ctf::Span<std::uint64_t> &keys) {
    std::string text;
    for (std::uint64_t key : keys) {
        if (!text.empty()) text += ',';
        text += std::to_string(key);
    }
    return text;
}

}  // namespace

int main(int argc, char **argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: train CONFIG [MB_SIZE|SCHEDULE] [K]\n");
        return 2;
    }
    const std::string schedule = argc > 2 ? argv[2] : "16";
    const std::size_t k = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 3;
    try {
        ctf::Config config = ctf::Config::from_file(argv[1]);
        config.schedule(schedule).max_sweeps(2);
        ctf::Reader reader(config);
        std::vector<std::size_t> dense;
        for (std::size_t s = 0; s < reader.stream_count(); ++s) {
            ctf_stream_info info = reader.stream_info(s);
            if (info.storage == CTF_STORAGE_DENSE) dense.push_back(s);
        }
        std::vector<std::uint8_t> saved;
        std::vector<std::string> after;
        std::size_t step = 0;
        for (ctf::Minibatch &mb : reader.minibatches(0)) {
            double loss = 0;
            for (std::size_t s : dense) loss += fake_loss(mb.padded(s));
            std::printf("step %zu keys %s loss %.6f%s\n", step, join(mb.keys()).c_str(), loss,
                        mb.sweep_end() ? " sweep_end" : "");
            if (step == k) saved = reader.checkpoint();
            if (step > k) after.push_back(join(mb.keys()));
            ++step;
        }
        if (saved.empty()) {
            std::fprintf(stderr, "train: fewer than %zu steps, no checkpoint taken\n", k + 1);
            return 1;
        }
        // A new process would read `saved` from disk; a new reader restores it.
        ctf::Reader resumed(config);
        resumed.restore(saved);
        std::size_t replayed = 0;
        for (ctf::Minibatch &mb : resumed.minibatches(0)) {
            if (replayed >= after.size() || after[replayed] != join(mb.keys())) {
                std::fprintf(stderr, "train: resumed step %zu differs\n", k + 1 + replayed);
                return 1;
            }
            ++replayed;
        }
        if (replayed != after.size()) {
            std::fprintf(stderr, "train: resumed run has %zu steps, expected %zu\n", replayed, after.size());
            return 1;
        }
        std::printf("resumed after step %zu: %zu minibatches identical\n", k, replayed);
        try {
            resumed.restore(std::vector<std::uint8_t>{1, 2, 3});
            std::fprintf(stderr, "train: a malformed checkpoint was accepted\n");
            return 1;
        } catch (const ctf::Error &e) {
            std::printf("malformed checkpoint rejected: %s\n", ctf_status_str(e.status()));
        }
    } catch (const ctf::Error &e) {
        std::fprintf(stderr, "train: %s\n", e.what());
        return 1;
    }
    return 0;
}
