/* ctf-reader C++17 wrapper: header-only RAII handles over the C API of ctf_reader.h.
 *
 * - ctf::Config, ctf::Reader, ctf::Minibatch own their C handles (move-only) and free them
 *   in their destructors.
 * - Every failing call throws ctf::Error, which carries the status and the library's message
 *   (data errors read FILE:LINE:COL: error: MESSAGE).
 * - Views are span-like (ctf::Span<T>: data(), size(), operator[], begin(), end()) and borrow
 *   from the minibatch: they are valid while the ctf::Minibatch lives.
 * - `for (ctf::Minibatch &mb : reader.minibatches(64)) { ... }` reads until the end of data.
 *
 * Thread safety is that of the C functions (see ctf_reader.h): a Reader is used by one thread
 * at a time; a Minibatch's const members may be used from any thread.
 */
#ifndef CTF_READER_HPP
#define CTF_READER_HPP

#include "ctf_reader.h"

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace ctf {

/** A failed call: the status and the library's message. */
class Error : public std::runtime_error {
public:
    Error(ctf_status status, const std::string &message)
        : std::runtime_error(message), status_(status) {}
    /** The C status of the failed call. */
    ctf_status status() const noexcept { return status_; }

private:
    ctf_status status_;
};

namespace detail {
inline std::string describe(ctf_status status, const char *message) {
    std::string text = ctf_status_str(status);
    if (message != nullptr && message[0] != '\0') {
        text += ": ";
        text += message;
    }
    return text;
}

/** Throws for any status but OK. */
inline void check(ctf_status status, const char *message) {
    if (status != CTF_STATUS_OK) {
        throw Error(status, describe(status, message));
    }
}

/** Throws for any status but OK, with this thread's last error message. The status is a
 *  parameter, so the call that returned it has run before the message is read: a failing
 *  call replaces the message, and a pointer read before it would dangle. */
inline void check_last(ctf_status status) {
    if (status != CTF_STATUS_OK) {
        throw Error(status, describe(status, ctf_last_error_message()));
    }
}
}  // namespace detail

/** A borrowed, contiguous, read-only sequence of T (like std::span<const T>). */
template <typename T>
class Span {
public:
    Span() noexcept = default;
    Span(const T *data, std::size_t size) noexcept : data_(data), size_(size) {}
    const T *data() const noexcept { return data_; }
    std::size_t size() const noexcept { return size_; }
    bool empty() const noexcept { return size_ == 0; }
    const T &operator[](std::size_t i) const noexcept { return data_[i]; }
    const T *begin() const noexcept { return data_; }
    const T *end() const noexcept { return data_ + size_; }

private:
    const T *data_ = nullptr;
    std::size_t size_ = 0;
};

/** One stream of a minibatch (see ctf_stream_view). */
class StreamView {
public:
    explicit StreamView(const ctf_stream_view &view) noexcept : view_(view) {}
    /** The raw C view. */
    const ctf_stream_view &raw() const noexcept { return view_; }
    bool dense() const noexcept { return view_.storage == CTF_STORAGE_DENSE; }
    std::size_t dim() const noexcept { return view_.dim; }
    std::size_t samples() const noexcept { return view_.samples; }
    std::size_t sequences() const noexcept { return view_.sequences; }
    /** The values as T, which must be the stream's element type (float or double). */
    template <typename T>
    Span<T> values() const {
        static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>,
                      "values are float or double");
        const ctf_element_type want =
            std::is_same_v<T, float> ? CTF_ELEMENT_TYPE_FLOAT32 : CTF_ELEMENT_TYPE_FLOAT64;
        if (view_.element_type != want) {
            throw Error(CTF_STATUS_INVALID_ARGUMENT,
                        "the stream's element type is not the one asked for");
        }
        return Span<T>(static_cast<const T *>(view_.values), view_.value_count);
    }
    /** The sum of all values, as a double, whatever the element type. */
    double sum() const noexcept {
        double total = 0;
        if (view_.element_type == CTF_ELEMENT_TYPE_FLOAT32) {
            const float *v = static_cast<const float *>(view_.values);
            for (std::size_t i = 0; i < view_.value_count; ++i) total += v[i];
        } else {
            const double *v = static_cast<const double *>(view_.values);
            for (std::size_t i = 0; i < view_.value_count; ++i) total += v[i];
        }
        return total;
    }
    /** Sparse: the row of each value (empty when dense). */
    Span<std::uint32_t> row_indices() const noexcept {
        return dense() ? Span<std::uint32_t>() : Span<std::uint32_t>(view_.row_indices, view_.value_count);
    }
    /** Sparse: samples + 1 column starts (empty when dense). */
    Span<std::uint32_t> column_starts() const noexcept {
        return dense() ? Span<std::uint32_t>()
                       : Span<std::uint32_t>(view_.column_starts, view_.samples + 1);
    }
    /** sequences + 1 offsets of each sequence's first sample. */
    Span<std::size_t> sequence_starts() const noexcept {
        return Span<std::size_t>(view_.sequence_starts, view_.sequences + 1);
    }
    /** The samples of each sequence in this stream. */
    Span<std::size_t> sequence_lengths() const noexcept {
        return Span<std::size_t>(view_.sequence_lengths, view_.sequences);
    }

private:
    ctf_stream_view view_;
};

/** A minibatch: owns a ctf_minibatch, frees it (returning buffers to the pool). */
class Minibatch {
public:
    Minibatch() noexcept = default;
    explicit Minibatch(ctf_minibatch *handle) : handle_(handle) {
        detail::check_last(ctf_minibatch_get_info(handle_, &info_));
    }
    Minibatch(Minibatch &&other) noexcept
        : handle_(std::exchange(other.handle_, nullptr)), info_(std::exchange(other.info_, {})) {}
    Minibatch &operator=(Minibatch &&other) noexcept {
        if (this != &other) {
            ctf_minibatch_free(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
            info_ = std::exchange(other.info_, {});
        }
        return *this;
    }
    Minibatch(const Minibatch &) = delete;
    Minibatch &operator=(const Minibatch &) = delete;
    ~Minibatch() { ctf_minibatch_free(handle_); }

    /** The C handle (still owned by this object). */
    const ctf_minibatch *get() const noexcept { return handle_; }
    explicit operator bool() const noexcept { return handle_ != nullptr; }
    std::size_t sequences() const noexcept { return info_.sequences; }
    std::size_t stream_count() const noexcept { return info_.stream_count; }
    std::size_t samples() const noexcept { return info_.samples; }
    bool sweep_end() const noexcept { return info_.sweep_end; }
    bool epoch_end() const noexcept { return info_.epoch_end; }
    std::uint64_t position() const noexcept { return info_.position; }
    Span<std::uint64_t> keys() const noexcept { return Span<std::uint64_t>(info_.keys, info_.sequences); }

    /** The view of stream `i` (configuration order). */
    StreamView stream(std::size_t i) const {
        ctf_stream_view view;
        detail::check_last(ctf_minibatch_stream(handle_, i, &view));
        return StreamView(view);
    }
    /** The padded view of dense stream `i` (made on first request, owned by the minibatch). */
    ctf_padded_view padded(std::size_t i) const {
        ctf_padded_view view;
        detail::check_last(ctf_minibatch_padded(handle_, i, &view));
        return view;
    }
    /** A DLPack tensor of a part of stream `i`; the caller calls its deleter once. */
    ctf_dl_managed_tensor *dlpack(std::size_t i, ctf_dlpack_part part = CTF_DLPACK_PART_VALUES) const {
        ctf_dl_managed_tensor *tensor = nullptr;
        detail::check_last(ctf_minibatch_dlpack(handle_, i, part, &tensor));
        return tensor;
    }

private:
    ctf_minibatch *handle_ = nullptr;
    ctf_minibatch_info info_{};
};

/** A reader configuration and options: owns a ctf_config. */
class Config {
public:
    /** An empty configuration, to fill with add_file / add_input / setters. */
    Config() { detail::check_last(ctf_config_new(&handle_)); }
    /** The reader section of a BrainScript file (`section`: "" for the default). */
    static Config from_file(const std::string &path, const std::string &section = "") {
        ctf_config *handle = nullptr;
        detail::check_last(
            ctf_config_from_file(path.c_str(), section.empty() ? nullptr : section.c_str(), &handle));
        return Config(handle);
    }
    /** The reader section of BrainScript text. */
    static Config from_brainscript(const std::string &text, const std::string &section = "") {
        ctf_config *handle = nullptr;
        detail::check_last(ctf_config_from_brainscript(text.c_str(), nullptr,
                                                       section.empty() ? nullptr : section.c_str(), &handle));
        return Config(handle);
    }
    Config(Config &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Config &operator=(Config &&other) noexcept {
        if (this != &other) {
            ctf_config_free(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    Config(const Config &) = delete;
    Config &operator=(const Config &) = delete;
    ~Config() { ctf_config_free(handle_); }

    const ctf_config *get() const noexcept { return handle_; }
    Config &add_file(const std::string &path) { return check(ctf_config_add_file(handle_, path.c_str())); }
    Config &add_input(const std::string &name, std::size_t dim, ctf_storage storage,
                      const std::string &alias = "") {
        return check(ctf_config_add_input(handle_, name.c_str(), alias.empty() ? nullptr : alias.c_str(), dim,
                                          storage));
    }
    Config &element_type(ctf_element_type type) { return check(ctf_config_set_element_type(handle_, type)); }
    Config &randomize(bool on) { return check(ctf_config_set_randomize(handle_, on)); }
    Config &seed(std::uint64_t seed) { return check(ctf_config_set_randomization_seed(handle_, seed)); }
    Config &max_errors(std::uint64_t n) { return check(ctf_config_set_max_errors(handle_, n)); }
    Config &threads(std::size_t n) { return check(ctf_config_set_threads(handle_, n)); }
    Config &prefetch(std::size_t n) { return check(ctf_config_set_prefetch(handle_, n)); }
    Config &parse_while_indexing(bool enabled) {
        return check(ctf_config_set_parse_while_indexing(handle_, enabled));
    }
    Config &pin_packers(bool enabled) { return check(ctf_config_set_pin_packers(handle_, enabled)); }
    Config &memory_budget(std::uint64_t bytes) {
        return check(ctf_config_set_memory_budget(handle_, bytes));
    }
    Config &partition(std::uint32_t rank, std::uint32_t workers) {
        return check(ctf_config_set_partition(handle_, rank, workers));
    }
    Config &max_samples(std::uint64_t n) { return check(ctf_config_set_max_samples(handle_, n)); }
    Config &max_sweeps(std::uint64_t n) { return check(ctf_config_set_max_sweeps(handle_, n)); }
    Config &epoch_size(std::uint64_t n) { return check(ctf_config_set_epoch_size(handle_, n)); }
    Config &schedule(const std::string &s) { return check(ctf_config_set_minibatch_schedule(handle_, s.c_str())); }

private:
    explicit Config(ctf_config *handle) noexcept : handle_(handle) {}
    Config &check(ctf_status status) {
        detail::check(status, ctf_config_message(handle_));
        return *this;
    }
    ctf_config *handle_ = nullptr;
};

class Reader;

/** An input range over a reader's minibatches: `for (Minibatch &mb : reader.minibatches(n))`. */
class MinibatchRange {
public:
    class iterator {
    public:
        using iterator_category = std::input_iterator_tag;
        using value_type = Minibatch;
        using difference_type = std::ptrdiff_t;
        using pointer = Minibatch *;
        using reference = Minibatch &;
        iterator() noexcept = default;
        iterator(Reader *reader, std::uint64_t size);
        Minibatch &operator*() noexcept { return current_; }
        Minibatch *operator->() noexcept { return &current_; }
        iterator &operator++();
        bool operator==(const iterator &other) const noexcept { return reader_ == other.reader_; }
        bool operator!=(const iterator &other) const noexcept { return reader_ != other.reader_; }

    private:
        Reader *reader_ = nullptr;
        std::uint64_t size_ = 0;
        Minibatch current_;
    };
    MinibatchRange(Reader &reader, std::uint64_t size) noexcept : reader_(&reader), size_(size) {}
    iterator begin() { return iterator(reader_, size_); }
    iterator end() noexcept { return iterator(); }

private:
    Reader *reader_;
    std::uint64_t size_;
};

/** A reader: owns a ctf_reader. */
class Reader {
public:
    /** A reader of a configuration (copied; the Config may go away). */
    explicit Reader(const Config &config) {
        detail::check_last(ctf_reader_new(config.get(), &handle_));
    }
    /** A reader, with default options, of the reader section of a BrainScript file. */
    static Reader from_file(const std::string &path, const std::string &section = "") {
        return Reader(Config::from_file(path, section));
    }
    Reader(Reader &&other) noexcept : handle_(std::exchange(other.handle_, nullptr)) {}
    Reader &operator=(Reader &&other) noexcept {
        if (this != &other) {
            ctf_reader_free(handle_);
            handle_ = std::exchange(other.handle_, nullptr);
        }
        return *this;
    }
    Reader(const Reader &) = delete;
    Reader &operator=(const Reader &) = delete;
    ~Reader() { ctf_reader_free(handle_); }

    ctf_reader *get() const noexcept { return handle_; }
    std::size_t stream_count() const noexcept { return ctf_reader_stream_count(handle_); }
    ctf_stream_info stream_info(std::size_t i) const {
        ctf_stream_info info;
        check(ctf_reader_stream_info(handle_, i, &info));
        return info;
    }
    std::size_t find_stream(const std::string &name) const {
        std::size_t index = 0;
        check(ctf_reader_find_stream(handle_, name.c_str(), &index));
        return index;
    }
    /** The next minibatch, or nothing at the end of the data (size 0 with a schedule). */
    std::optional<Minibatch> next(std::uint64_t size) {
        ctf_minibatch *mb = nullptr;
        ctf_status status = ctf_reader_next(handle_, size, &mb);
        if (status == CTF_STATUS_END_OF_DATA) return std::nullopt;
        check(status);
        return Minibatch(mb);
    }
    /** Range-for over the minibatches until the end of the data. */
    MinibatchRange minibatches(std::uint64_t size) noexcept { return MinibatchRange(*this, size); }
    /** The checkpoint after the last minibatch handed out, as bytes. */
    std::vector<std::uint8_t> checkpoint() const {
        std::vector<std::uint8_t> bytes(CTF_CHECKPOINT_SIZE);
        std::size_t written = 0;
        check(ctf_reader_checkpoint(handle_, bytes.data(), bytes.size(), &written));
        bytes.resize(written);
        return bytes;
    }
    /** Resumes right after the minibatch a checkpoint was taken after. An empty or
     *  malformed checkpoint throws CTF_STATUS_CHECKPOINT_ERROR. */
    void restore(const std::vector<std::uint8_t> &bytes) {
        // An empty vector's data() may be NULL, which the C function takes for a missing
        // argument: pass a valid pointer with the length 0 instead.
        static const std::uint8_t none = 0;
        check(ctf_reader_restore(handle_, bytes.empty() ? &none : bytes.data(), bytes.size()));
    }
    ctf_counters counters() const {
        ctf_counters c;
        check(ctf_reader_counters(handle_, &c));
        return c;
    }
    ctf_progress progress() const {
        ctf_progress p;
        check(ctf_reader_progress(handle_, &p));
        return p;
    }

private:
    void check(ctf_status status) const { detail::check(status, ctf_reader_message(handle_)); }
    ctf_reader *handle_ = nullptr;
};

inline MinibatchRange::iterator::iterator(Reader *reader, std::uint64_t size) : reader_(reader), size_(size) {
    ++*this;
}

inline MinibatchRange::iterator &MinibatchRange::iterator::operator++() {
    std::optional<Minibatch> next = reader_->next(size_);
    if (next) {
        current_ = std::move(*next);
    } else {
        current_ = Minibatch();
        reader_ = nullptr;
    }
    return *this;
}

}  // namespace ctf

#endif  // CTF_READER_HPP
