// Off the wire, the optimized twin: classic PCAP -> Ethernet [802.1Q] -> IPv4 -> UDP ->
// MoldUDP64, read in place from a read-only buffer. Every length field is checked against
// the bytes that are really there before anything is read behind it, so no input can make
// this read out of bounds. Decisions (what is counted, what raises) are the naive twin's;
// see naive/pcap.py's docstring.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace twinmatch::pcap {

// Big-endian loads (network byte order). memcpy into a local is how C++ reads an
// unaligned integer without undefined behaviour; the compiler turns it into one load.
inline std::uint16_t be16(const std::uint8_t* p) {
    std::uint16_t v;
    std::memcpy(&v, p, 2);
    return __builtin_bswap16(v);
}
inline std::uint32_t be32(const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return __builtin_bswap32(v);
}
inline std::uint64_t be64(const std::uint8_t* p) {
    std::uint64_t v;
    std::memcpy(&v, p, 8);
    return __builtin_bswap64(v);
}
inline std::uint32_t le32(const std::uint8_t* p) {
    std::uint32_t v;
    std::memcpy(&v, p, 4);
    return v;  // the machines we build for are little-endian
}

constexpr std::size_t kGlobalHeader = 24;
constexpr std::size_t kRecordHeader = 16;
constexpr std::size_t kMoldHeader = 20;
constexpr std::uint16_t kEndOfSession = 0xFFFF;
constexpr std::uint64_t kU64Max = ~std::uint64_t{0};
constexpr std::uint32_t kMaxSnaplen = 262144;  // libpcap's bound on any record
constexpr std::size_t kMaxStreams = 64;        // MAX_STREAMS in contract/pcap.py

// The statistics; names and order match STAT_KEYS in contract/pcap.py (tests/test_contract.py).
struct Stats {
    std::uint64_t nanosecond = 0, big_endian = 0, snaplen = 0, packets = 0, truncated = 0,
                  non_ipv4 = 0, non_udp = 0, ipv4_fragments = 0, malformed = 0,
                  not_moldudp64 = 0, bad_moldudp64 = 0, moldudp64 = 0, unsequenced = 0,
                  heartbeats = 0, end_of_session = 0, messages = 0, gaps = 0, gap_messages = 0,
                  first_gap_seq = 0, duplicate_packets = 0, duplicate_messages = 0,
                  streams = 0, untracked = 0, filtered = 0, next_seq = 0;
    char session[10] = {};
};

// One MoldUDP64 stream: a destination (IPv4 group, UDP port) and a session, with its own
// expected sequence number. A fixed table: a new stream never allocates.
struct Stream {
    std::uint32_t group = 0;  // the destination address as read big-endian
    std::uint16_t port = 0;
    char session[10] = {};
    bool have_expected = false;
    std::uint64_t expected = 0;  // next sequence number we expect
    std::uint64_t packets = 0, messages = 0, gaps = 0, gap_messages = 0;
};

// Which packets to read (naive/pcap.py's group/port/session arguments); off by default.
struct Filter {
    bool group_on = false, port_on = false, session_on = false;
    std::uint32_t group = 0;
    std::uint16_t port = 0;
    char session[10] = {};
};

enum class Error : std::uint8_t { None = 0, BadMagic = 1, BadLinkType = 2, RecordTooLong = 3 };

// Adds without wrapping: a counter of missing messages stops at 2**64 - 1 (both twins).
inline std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) {
    return a > kU64Max - b ? kU64Max : a + b;
}

// Walk the `count` message blocks after the 20-byte MoldUDP64 header of p[0, len) (len >=
// 20): the end offset of the last block, or 0 if one runs past len. Every length is checked
// before anything behind it is read. (native/feed.hpp, the live receiver, uses it too.)
inline std::size_t mold_blocks_end(const std::uint8_t* p, std::size_t len, std::uint32_t count) {
    std::size_t end = kMoldHeader;
    for (std::uint32_t i = 0; i < count; ++i) {
        if (len - end < 2) return 0;
        const std::size_t block = 2 + std::size_t{be16(p + end)};
        if (len - end < block) return 0;
        end += block;
    }
    return end;
}

class Scanner {
public:
    Stats stats;
    Filter filter;
    Error error = Error::None;
    std::uint32_t error_value = 0;  // the bad magic, link type or record length
    bool header_done = false;
    bool big_endian = false;
    std::uint64_t offset = 0;       // file offset of the first byte not yet consumed
    std::uint32_t max_record = kMaxSnaplen;  // the largest incl_len a record may have
    Stream streams[kMaxStreams];    // the first stats.streams are in use

    // Consume every whole record at the start of buf[0, n) and append the MoldUDP64 message
    // blocks of new messages to out (which must hold n bytes: the blocks are a subset of
    // the input). Returns the bytes consumed; on a header error returns 0 and sets error.
    std::size_t feed(const std::uint8_t* buf, std::size_t n, std::uint8_t* out,
                     std::size_t& out_len) {
        out_len = 0;
        std::size_t pos = 0;
        if (error != Error::None) return 0;
        if (!header_done) {
            if (n < kGlobalHeader) return 0;
            if (!parse_global_header(buf)) return 0;
            pos = kGlobalHeader;
        }
        while (n - pos >= kRecordHeader) {
            const std::uint8_t* rec = buf + pos;
            const std::uint32_t incl_len = u32(rec + 8);
            const std::uint32_t orig_len = u32(rec + 12);
            // Refuse a bogus length now, not after waiting for (and buffering) its body.
            if (incl_len > max_record) {
                error = Error::RecordTooLong;
                error_value = incl_len;
                break;  // `offset` below ends at this record: the error's offset
            }
            if (n - pos - kRecordHeader < incl_len) break;  // the body is not all here yet
            packet(rec + kRecordHeader, incl_len, incl_len < orig_len, out, out_len);
            pos += kRecordHeader + incl_len;
        }
        offset += pos;
        return pos;
    }

private:
    std::size_t last_stream_ = 0;  // the stream of the last packet: checked first

    std::uint32_t u32(const std::uint8_t* p) const { return big_endian ? be32(p) : le32(p); }

    // --8<-- [start:pcap_header]
    bool parse_global_header(const std::uint8_t* p) {
        const std::uint32_t magic = le32(p);
        // Read little-endian; the swapped spellings mean a big-endian file.
        switch (magic) {
            case 0xA1B2C3D4: stats.nanosecond = 0; big_endian = false; break;
            case 0xA1B23C4D: stats.nanosecond = 1; big_endian = false; break;
            case 0xD4C3B2A1: stats.nanosecond = 0; big_endian = true; break;
            case 0x4D3CB2A1: stats.nanosecond = 1; big_endian = true; break;
            default: error = Error::BadMagic; error_value = magic; return false;
        }
        stats.big_endian = big_endian;
        stats.snaplen = u32(p + 16);
        const std::uint32_t snaplen = static_cast<std::uint32_t>(stats.snaplen);
        max_record = snaplen > 0 && snaplen <= kMaxSnaplen ? snaplen : kMaxSnaplen;
        const std::uint32_t linktype = u32(p + 20) & 0xFFFF;
        if (linktype != 1) {  // only Ethernet
            error = Error::BadLinkType;
            error_value = linktype;
            return false;
        }
        header_done = true;
        return true;
    }
    // --8<-- [end:pcap_header]

    void packet(const std::uint8_t* frame, std::size_t len, bool cut, std::uint8_t* out,
                std::size_t& out_len) {
        ++stats.packets;
        if (cut) {
            ++stats.truncated;
            return;
        }
        // --8<-- [start:vlan]
        if (len < 14) { ++stats.malformed; return; }
        std::size_t pos = 12;
        std::uint16_t ethertype = be16(frame + pos);
        while (ethertype == 0x8100 || ethertype == 0x88A8) {  // 802.1Q / 802.1ad tag
            pos += 4;                                         // skip TPID + TCI
            if (len < pos + 2) { ++stats.malformed; return; }
            ethertype = be16(frame + pos);
        }
        if (ethertype != 0x0800) { ++stats.non_ipv4; return; }
        const std::uint8_t* ip = frame + pos + 2;
        const std::size_t ip_avail = len - pos - 2;
        // --8<-- [end:vlan]
        // --8<-- [start:ipv4]
        if (ip_avail < 20) { ++stats.malformed; return; }
        // IHL counts 32-bit words (a valid header: 20..60 bytes).
        const std::size_t header_len = std::size_t{ip[0] & 0x0Fu} * 4;
        const std::size_t total_len = be16(ip + 2);
        if ((ip[0] >> 4) != 4 || header_len < 20 || total_len < header_len ||
            total_len > ip_avail) {
            ++stats.malformed;
            return;
        }
        if (be16(ip + 6) & 0x3FFF) { ++stats.ipv4_fragments; return; }  // MF or offset
        if (ip[9] != 17) { ++stats.non_udp; return; }
        const std::uint8_t* udp = ip + header_len;
        // Bounded by the IP length, not the frame (which Ethernet pads to 60 bytes).
        const std::size_t udp_avail = total_len - header_len;
        if (udp_avail < 8) { ++stats.malformed; return; }
        const std::size_t udp_len = be16(udp + 4);
        if (udp_len < 8 || udp_len > udp_avail) { ++stats.malformed; return; }
        const std::uint32_t group = be32(ip + 16);  // destination address
        const std::uint16_t port = be16(udp + 2);   // destination port
        // --8<-- [end:ipv4]
        mold(group, port, udp + 8, udp_len - 8, out, out_len);
    }

    // This packet's stream (a new one on first sight), or nullptr if the table is full.
    // The last packet's stream is tried first: a capture is mostly one stream at a time.
    Stream* find_stream(std::uint32_t group, std::uint16_t port, const std::uint8_t* session) {
        auto same = [&](const Stream& s) {
            return s.group == group && s.port == port && std::memcmp(s.session, session, 10) == 0;
        };
        const std::size_t used = static_cast<std::size_t>(stats.streams);
        if (last_stream_ < used && same(streams[last_stream_])) return &streams[last_stream_];
        for (std::size_t i = 0; i < used; ++i)
            if (same(streams[i])) { last_stream_ = i; return &streams[i]; }
        if (used == kMaxStreams) return nullptr;
        Stream& s = streams[used];
        s.group = group;
        s.port = port;
        std::memcpy(s.session, session, 10);
        ++stats.streams;
        last_stream_ = used;
        return &s;
    }

    void gap_check(Stream& s, std::uint64_t seq) {
        if (s.have_expected && seq > s.expected) {
            if (stats.gaps == 0) stats.first_gap_seq = s.expected;
            ++stats.gaps;
            ++s.gaps;
            stats.gap_messages = sat_add(stats.gap_messages, seq - s.expected);
            s.gap_messages = sat_add(s.gap_messages, seq - s.expected);
        }
    }

    // --8<-- [start:mold_seq]
    void mold(std::uint32_t group, std::uint16_t port, const std::uint8_t* p, std::size_t len,
              std::uint8_t* out, std::size_t& out_len) {
        if ((filter.group_on && group != filter.group) || (filter.port_on && port != filter.port)) {
            ++stats.filtered;
            return;
        }
        if (len < kMoldHeader) { ++stats.not_moldudp64; return; }
        if (filter.session_on && std::memcmp(p, filter.session, 10) != 0) {
            ++stats.filtered;
            return;
        }
        const std::uint64_t seq = be64(p + 10);
        const std::uint16_t count = be16(p + 18);
        const bool no_blocks = count == 0 || count == kEndOfSession;
        // Walk the blocks once to check they all fit; remember where block `skip` starts
        // later, once we know skip. A packet whose last sequence number would pass 2**64-1
        // is not a valid MoldUDP64 packet either.
        std::size_t end = kMoldHeader;
        if (!no_blocks) {
            if (seq > kU64Max - count) { ++stats.bad_moldudp64; return; }
            end = mold_blocks_end(p, len, count);
            if (end == 0) { ++stats.bad_moldudp64; return; }
        }
        Stream* found = find_stream(group, port, p);
        if (found == nullptr) { ++stats.untracked; return; }
        Stream& s = *found;
        ++stats.moldudp64;
        ++s.packets;
        std::memcpy(stats.session, p, 10);
        std::uint32_t skip = 0;
        bool deliver = !no_blocks;
        if (seq == 0) {
            ++stats.unsequenced;  // a sanitized capture: deliver, nothing to track
        } else if (no_blocks) {   // heartbeat / end of session: seq = next expected
            if (count == 0) ++stats.heartbeats; else ++stats.end_of_session;
            gap_check(s, seq);
            if (!s.have_expected || seq > s.expected) {
                s.expected = seq;
                s.have_expected = true;
            }
        } else {
            gap_check(s, seq);
            if (!s.have_expected || seq > s.expected) {
                s.expected = seq;
                s.have_expected = true;
            }
            const std::uint64_t seen = s.expected - seq;  // messages already delivered
            if (seen >= count) {
                ++stats.duplicate_packets;
                stats.duplicate_messages += count;
                deliver = false;
            } else {
                skip = static_cast<std::uint32_t>(seen);
                stats.duplicate_messages += skip;
                s.expected = seq + count;
            }
        }
        stats.next_seq = s.have_expected ? s.expected : 0;
        if (!deliver) return;
        std::size_t start = kMoldHeader;
        for (std::uint32_t i = 0; i < skip; ++i) start += 2 + std::size_t{be16(p + start)};
        std::memcpy(out + out_len, p + start, end - start);
        out_len += end - start;
        stats.messages += count - skip;
        s.messages += count - skip;
    }
    // --8<-- [end:mold_seq]
};

}  // namespace twinmatch::pcap
