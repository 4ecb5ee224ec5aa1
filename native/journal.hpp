// The optimized twin of the input journal (chapter 11): the same bytes as
// naive/journal.py, written without an allocation per record, and read with the same
// checks. The format is in contract/journal.py; the structs below fix it for C++.
#pragma once

#include <array>
#include <bit>
#include <cerrno>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include "dtypes.hpp"

namespace twinmatch::journal {

// --8<-- [start:crc]
// CRC-32 as zlib computes it (reflected polynomial 0xEDB88320, start and end inverted).
// "Slicing by 8": eight tables of 256 entries, built at compile time, let the loop
// consume 8 bytes per step with 8 independent lookups instead of one lookup per byte
// (each byte's step depends on the last, so the byte loop cannot overlap its loads).
inline constexpr std::array<std::array<std::uint32_t, 256>, 8> kCrcTables = [] {
    std::array<std::array<std::uint32_t, 256>, 8> t{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        t[0][i] = c;
    }
    for (std::uint32_t i = 0; i < 256; ++i)
        for (std::size_t s = 1; s < 8; ++s)
            t[s][i] = (t[s - 1][i] >> 8) ^ t[0][t[s - 1][i] & 0xFF];
    return t;
}();

// crc: a previous result, to continue over more bytes (as zlib.crc32(data, crc)).
inline std::uint32_t crc32(const void* data, std::size_t n, std::uint32_t crc = 0) {
    const auto* p = static_cast<const unsigned char*>(data);
    const auto& t = kCrcTables;
    crc = ~crc;
    for (; n >= 8; n -= 8, p += 8) {
        std::uint32_t lo, hi;
        std::memcpy(&lo, p, 4);  // memcpy: the bytes may sit at any address
        std::memcpy(&hi, p + 4, 4);
        lo ^= crc;  // little-endian host assumed, as by every struct in dtypes.hpp
        crc = t[7][lo & 0xFF] ^ t[6][(lo >> 8) & 0xFF] ^
              t[5][(lo >> 16) & 0xFF] ^ t[4][lo >> 24] ^
              t[3][hi & 0xFF] ^ t[2][(hi >> 8) & 0xFF] ^
              t[1][(hi >> 16) & 0xFF] ^ t[0][hi >> 24];
    }
    for (; n > 0; --n, ++p) crc = t[0][(crc ^ *p) & 0xFF] ^ (crc >> 8);
    return ~crc;
}
static_assert(std::endian::native == std::endian::little,
              "the journal is little-endian");
// --8<-- [end:crc]

// --8<-- [start:record]
inline constexpr char kMagic[8] = {'T', 'M', 'J', 'O', 'U', 'R', 'N', '1'};
inline constexpr std::uint32_t kVersion = 1;

struct FileHeader {
    char magic[8];
    std::uint32_t version;
    std::uint32_t payload_size;
};
static_assert(sizeof(FileHeader) == 16);

// One record exactly as it sits in the file: the length and CRC, then the payload
// (sequence number + the op). The CRC covers the 40 bytes from `seq` on.
struct Record {
    std::uint32_t length;  // always kPayload in version 1
    std::uint32_t crc;
    std::uint64_t seq;
    OpRecord op;
};
inline constexpr std::uint32_t kPayload = sizeof(std::uint64_t) + sizeof(OpRecord);
static_assert(kPayload == 40 && sizeof(Record) == 48);
static_assert(offsetof(Record, seq) == 8 && offsetof(Record, op) == 16);
// --8<-- [end:record]

enum Policy : std::uint8_t { kEvery = 0, kBatch = 1, kTimer = 2 };  // contract POLICY_*
// Records a writer buffers at most; any policy flushes when this many are pending, so
// the buffer is allocated once, at open (contract.journal.BUFFER_RECORDS).
inline constexpr std::uint32_t kBufferRecords = 4096;

class Writer {
public:
    // --8<-- [start:writer_open]
    // Step 1 of opening: take the journal's lock (the file `lock_path`, next to it). A
    // second writer, in this process or another, gets EWOULDBLOCK instead of a file in
    // which two engines interleave records. Errors are errno values (the binding
    // raises JournalLocked for EWOULDBLOCK, OSError for the others).
    int lock(const char* lock_path) {
        lock_fd_ = ::open(lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (lock_fd_ < 0) return errno;
        if (::flock(lock_fd_, LOCK_EX | LOCK_NB) != 0) return errno;
        return 0;
    }

    // Step 2, a new journal: the header goes to `tmp`, is fsync'ed, and is renamed
    // over `path`, then the directory is fsync'ed. A crash or a full disk at any point
    // leaves the old file (or none) at `path`, never a torn header.
    int create(const char* path, const char* tmp, const char* dir) {
        fd_ = ::open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd_ < 0) return errno;
        FileHeader h{};
        std::memcpy(h.magic, kMagic, 8);
        h.version = kVersion;
        h.payload_size = kPayload;
        std::size_t done = 0;
        int e = write_all(&h, sizeof h, done);
        if (e == 0 && ::fsync(fd_) != 0) e = errno;
        if (e == 0 && ::rename(tmp, path) != 0) e = errno;
        if (e == 0) e = fsync_dir(dir);
        if (e != 0) {
            ::close(fd_);
            fd_ = -1;
            ::unlink(tmp);  // nothing half-made stays behind (after a rename: no tmp)
            return e;
        }
        start(sizeof h, 1);
        return 0;
    }
    // --8<-- [end:writer_open]

    // Step 2, an existing journal already checked by scan(): cut at resume_at (the end
    // of its last good record) and continue from next_seq.
    int resume(const char* path, std::uint64_t resume_at, std::uint64_t next_seq) {
        fd_ = ::open(path, O_WRONLY | O_CLOEXEC);
        if (fd_ < 0) return errno;
        auto at = static_cast<off_t>(resume_at);
        if (::ftruncate(fd_, at) != 0 || ::lseek(fd_, at, SEEK_SET) < 0) return errno;
        start(resume_at, next_seq);
        return 0;
    }

    void configure(Policy policy, std::uint32_t batch, std::int64_t interval_ns, bool fsync) {
        policy_ = policy;
        batch_ = batch;
        interval_ns_ = interval_ns;
        fsync_ = fsync;
        buf_.resize(kBufferRecords);  // the one allocation
    }
    ~Writer() {  // the binding flushes before; this only frees the descriptors
        if (fd_ >= 0) ::close(fd_);
        if (lock_fd_ >= 0) ::close(lock_fd_);
    }

    // --8<-- [start:writer]
    // The hot path: fill the next buffered record in place, maybe flush. No allocation.
    // A failed writer takes nothing (one branch per call); a failed flush empties the
    // buffer (fail()), so pending_ never passes kBufferRecords.
    int append(const OpRecord* ops, std::size_t n) {
        if (failed_ != 0) return failed_;
        for (std::size_t k = 0; k < n; ++k) {
            if (pending_ == 0 && policy_ == kTimer) oldest_ = now_ns();
            Record& r = buf_[pending_++];
            r.length = kPayload;
            r.seq = next_seq_++;
            r.op = ops[k];
            r.crc = crc32(&r.seq, kPayload);
            if (due())
                if (int e = flush()) return e;
        }
        return 0;
    }

    // Hand the pending records to the OS (and fsync, if asked): then they are
    // acknowledged. On an error, only the whole records that reached the file count
    // (write(2) may stop part-way); the rest are dropped and the writer fails for good.
    int flush() {
        if (failed_ != 0) return failed_;
        if (pending_ > 0) {
            std::size_t done = 0;
            int e = write_all(buf_.data(), pending_ * sizeof(Record), done);
            std::size_t whole = done / sizeof(Record);
            end_ += whole * sizeof(Record);
            if (e != 0) return fail(e, whole, !fsync_);  // fsync asked: none acked
            if (fsync_ && ::fsync(fd_) != 0) return fail(errno, whole, false);
            if (fsync_) synced_seq_ = next_seq_ - 1;
            pending_ = 0;
            ++flushes_;
        }
        flushed_seq_ = next_seq_ - 1;
        return 0;
    }
    // --8<-- [end:writer]

    // Flush, then fsync whatever policy: every record up to flushed_seq survives a
    // power cut. A snapshot calls this first (native and naive Engine.snapshot).
    int sync() {
        if (int e = flush()) return e;
        if (synced_seq_ == flushed_seq_) return 0;
        if (::fsync(fd_) != 0) return fail(errno, 0, false);
        synced_seq_ = flushed_seq_;
        return 0;
    }

    // The timer policy's clock, checked from outside append: flush if the oldest
    // pending record has waited interval_ns. Returns 1 if it flushed, or -errno.
    int poll() {
        if (failed_ != 0 || pending_ == 0 || policy_ != kTimer) return 0;
        if (now_ns() - oldest_ < interval_ns_) return 0;
        int e = flush();
        return e != 0 ? -e : 1;
    }
    // Nanoseconds until poll() must flush (0: now), or -1 if nothing is waiting on the
    // timer (nothing pending, or another policy).
    std::int64_t due_in_ns() const {
        if (failed_ != 0 || pending_ == 0 || policy_ != kTimer) return -1;
        std::int64_t left = oldest_ + interval_ns_ - now_ns();
        return left > 0 ? left : 0;
    }

    // Flush, close, release the lock. A writer that failed before just closes: its
    // failure was reported when it happened.
    int close() {
        int e = 0;
        if (fd_ >= 0) {
            bool was_failed = failed_ != 0;
            if (!was_failed) e = flush();
            if (::close(fd_) != 0 && !was_failed && e == 0) e = errno;
            fd_ = -1;
        }
        if (lock_fd_ >= 0) {  // closing the descriptor releases the lock
            ::close(lock_fd_);
            lock_fd_ = -1;
        }
        return e;
    }

    bool is_open() const { return fd_ >= 0; }
    int failed() const { return failed_; }
    std::uint64_t next_seq() const { return next_seq_; }
    std::uint64_t flushed_seq() const { return flushed_seq_; }
    std::uint64_t synced_seq() const { return synced_seq_; }
    std::uint64_t flushes() const { return flushes_; }

private:
    void start(std::uint64_t end, std::uint64_t next_seq) {
        end_ = end;
        next_seq_ = next_seq;
        flushed_seq_ = synced_seq_ = next_seq - 1;  // what is in the file is old news
    }
    // The writer's one failure: keep the `whole` records that reached the file (they
    // are acknowledged if `ack`), cut a partial record off (best effort: if the cut
    // fails too, a reader drops the torn tail), drop the rest, refuse all else.
    int fail(int e, std::size_t whole, bool ack) {
        std::uint64_t in_file = next_seq_ - 1 - pending_ + whole;
        if (ack) flushed_seq_ = in_file;
        next_seq_ = in_file + 1;
        pending_ = 0;
        (void)::ftruncate(fd_, static_cast<off_t>(end_));
        failed_ = e;
        return e;
    }
    bool due() const {
        if (pending_ == kBufferRecords) return true;  // the buffer is full: any policy
        switch (policy_) {
            case kEvery: return true;
            case kBatch: return pending_ >= batch_;
            default: return now_ns() - oldest_ >= interval_ns_;
        }
    }
    static std::int64_t now_ns() {  // CLOCK_MONOTONIC, as Python's time.monotonic_ns
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch()).count();
    }
    // write(2) until all n bytes are in or an error: `done` says how many got in.
    int write_all(const void* data, std::size_t n, std::size_t& done) {
        const auto* p = static_cast<const char*>(data);
        while (done < n) {
            ssize_t w = ::write(fd_, p + done, n - done);
            if (w < 0) {
                if (errno == EINTR) continue;
                return errno;
            }
            done += static_cast<std::size_t>(w);
        }
        return 0;
    }
    static int fsync_dir(const char* dir) {  // so that a rename in it survives a power cut
        int d = ::open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (d < 0) return errno;
        int e = ::fsync(d) != 0 ? errno : 0;
        ::close(d);
        return e;
    }

    int fd_ = -1, lock_fd_ = -1;
    int failed_ = 0;  // the errno of the write or fsync that failed; 0 while healthy
    Policy policy_ = kEvery;
    std::uint32_t batch_ = 1;
    std::int64_t interval_ns_ = 0;
    bool fsync_ = false;
    std::uint64_t next_seq_ = 1, flushed_seq_ = 0, synced_seq_ = 0, flushes_ = 0;
    std::uint64_t end_ = 0;     // bytes of the file that hold the header and whole records
    std::int64_t oldest_ = 0;   // when the oldest pending record was appended (timer)
    std::vector<Record> buf_;
    std::size_t pending_ = 0;
};

// --8<-- [start:scan]
// What scan() found: code is one of contract.journal's SCAN_* (0 = ok); on an error,
// offset, value and expected say where and what (scan_message makes the words).
struct Scan {
    int code = 0;
    std::uint64_t offset = 0, value = 0, expected = 0;
    std::uint64_t records = 0, last_seq = 0, valid_end = 0;
    std::int64_t torn_offset = -1;
    std::uint64_t torn_bytes = 0;
};

// Check every record of a journal held in memory and copy out its ops. The same
// checks, in the same order, as naive/journal.py's read_journal: the length prefix is
// compared with kPayload before the payload is touched, so a huge length costs
// nothing, and `out` is reserved once from the file's size (never from a length).
inline Scan scan(const unsigned char* data, std::size_t n, std::vector<OpRecord>& out) {
    Scan s;
    auto fail = [&](int code, std::uint64_t at, std::uint64_t value, std::uint64_t expected) {
        s.code = code;
        s.offset = at;
        s.value = value;
        s.expected = expected;
        return s;
    };
    if (n < sizeof(FileHeader)) return fail(1, 0, n, 0);
    FileHeader h;
    std::memcpy(&h, data, sizeof h);
    if (std::memcmp(h.magic, kMagic, 8) != 0) return fail(2, 0, 0, 0);
    if (h.version != kVersion || h.payload_size != kPayload)
        return fail(3, 8, h.version, h.payload_size);
    out.clear();
    out.reserve((n - sizeof(FileHeader)) / sizeof(Record));
    std::size_t at = sizeof(FileHeader);
    while (at < n) {
        std::size_t left = n - at;
        if (left < 8) break;  // torn inside a record header
        Record r;
        std::memcpy(&r, data + at, 8);  // length and crc only, for now
        if (r.length != kPayload) return fail(4, at, r.length, kPayload);
        if (left < sizeof(Record)) break;  // torn inside the payload
        std::memcpy(&r, data + at, sizeof r);
        std::uint32_t actual = crc32(data + at + 8, kPayload);
        if (actual != r.crc) {
            if (left == sizeof(Record)) break;  // the last record, damaged: torn
            return fail(5, at, r.crc, actual);
        }
        if (r.seq != s.last_seq + 1) return fail(6, at, r.seq, s.last_seq + 1);
        s.last_seq = r.seq;
        ++s.records;
        out.push_back(r.op);  // within the reserved capacity: no reallocation
        at += sizeof(Record);
    }
    s.valid_end = at;
    s.torn_bytes = n - at;
    s.torn_offset = s.torn_bytes ? static_cast<std::int64_t>(at) : -1;
    return s;
}
// --8<-- [end:scan]

}  // namespace twinmatch::journal
