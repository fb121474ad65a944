// Every number the swap engine and its switch policy assume, in one place:
// each with why it is what it is (the bench that measures it, in
// bench/README.md) and the sentence of libnvshare(8) that states it. The
// doc test (tests/system/doc_test.py, doc-ranges) holds the page to these
// values: change one here and the page must say so.
// Structural limits (table sizes, alignments) stay beside their code.
#pragma once

#include <cstdint>

namespace nvshare::preload::tuning {

inline constexpr uint64_t kMs = 1000ull * 1000;
inline constexpr uint64_t kSec = 1000 * kMs;

// ---- chunks (swap_plan) ----

// "physical chunks of at most 64 MiB, or 512 MiB on a GPU of 64 GiB or
// more". Large enough that mapping costs vanish beside the copy, small
// enough that what stays or moves is chosen finely (the cost of
// cuMemSetAccess and unmapping is per chunk: bench/README.md,
// swap_mechanisms). On a GPU of at least kLargeChunkShare such chunks,
// granting access while the bus copies is the slow part of a swap-in, and
// it costs far less in chunks of 512 MiB (`driver_probes.py
// access`).
inline constexpr uint64_t kMaxChunk = 64ull << 20;
inline constexpr uint64_t kLargeChunk = 512ull << 20;
inline constexpr uint64_t kLargeChunkShare = 128;

// ---- allocations smaller than the granularity (small_blocks) ----

// "carved out of slabs of 8 MiB": each slab is one chunk of the engine's
// (4 of the usual 2 MiB granularity), so that allocations of up to the
// granularity share one (a slab of one granularity would hold a single
// allocation above half of it), and the per-chunk costs of a move
// (mapping, cuMemSetAccess, unmapping) are shared by 4 times more of them
// than with a slab of the granularity. "up to one slab of memory per GPU
// beyond what the program asked for": the empty slab kept (beside the free
// space of the slabs in use). Rounded up to the granularity.
inline constexpr uint64_t kSmallSlab = 8ull << 20;

// ---- rates assumed until the process has measured its own ----

// "it assumes 40 GB/s each way for swappable memory": the swap engine's
// copies run at the bus's speed, about 50 GB/s each way on PCIe 5
// (swap_mechanisms); a little below it, so that the first switch is not
// counted cheaper than it turns out.
inline constexpr double kAssumedSwapEngineRate = 40e9;
// "16 GB/s out and 48 GB/s in for managed memory": the driver's bulk
// migration of managed memory over PCIe 5 (evict_rate, swap_mechanisms);
// eviction is slower, since the driver allocates host pages as it goes.
inline constexpr double kAssumedEvictRate = 16e9;
inline constexpr double kAssumedSwapInRate = 48e9;
// "host memory not yet made at 10 GB/s", standing in for the samples of
// its own making the process does not have yet (host_memory::pin_rate, the
// better of the last two): huge pages faulted in by up to 8 threads
// while the chunks faulted in before are registered (`pin_rate`,
// `driver_probes.py pinways`, `register`); a chunk at a time that is 12 to
// 18 GB/s on an H200 host of 16 cores, batches about 30; lower, since fewer
// cores or no huge pages make it slower.
inline constexpr double kAssumedPinRate = 10e9;

// ---- what stays on the GPU ----

// "keeps a 32nd of the GPU's capacity (at most 2 GiB) less than nvshared
// allows": nvshared counts allocations, but every process's CUDA contexts
// and the driver take device memory too (about 0.5 GiB a context), which
// the next holder would otherwise find taken and have to leave its data in
// host memory. Moving 2 GiB more costs ~40 ms each way at the bus's rate.
inline constexpr uint64_t kKeepHeadroomShare = 32;
inline constexpr uint64_t kKeepHeadroomMax = 2ull << 30;

// ---- what no placement takes ----

// "leaves a 256th of the GPU's memory (at most 256 MiB) free for the
// driver": the driver takes device memory outside every allocation for a
// new stream, event or module and for a kernel's local memory, and fails
// that call (out of memory) on a full GPU. A program sees nvshared's
// capacity, not that the device is full of other processes' memory, so it
// cannot leave that room itself. A release leaves it free beside its
// headroom (swap_plan::kept_at_release): with several processes' contexts
// on the GPU the headroom alone, less the contexts, can be less than this
// room, and the next holder's swap-in would then meet a full GPU at every
// switch.
inline constexpr uint64_t kDriverReserveShare = 256;
inline constexpr uint64_t kDriverReserveMax = 256ull << 20;

// ---- waiting for room at a grant ----

// "tries again, every 2 ms while the room grows ... and every 20 ms while it
// does not, until it has not grown for 0.5 s, for at most 10 s": the
// previous holder remaps a group about every 20 ms at the bus's speed, and
// a process that just ended is freed by the driver after its socket
// closed. Shorter on a GPU shared with others, whose memory may be what
// fills it.
inline constexpr uint64_t kRoomPollFastNs = 2 * kMs;
inline constexpr uint64_t kRoomPollNs = 20 * kMs;
inline constexpr uint64_t kRoomWaitNs = 500 * kMs;
inline constexpr uint64_t kSharedRoomWaitNs = 100 * kMs;
inline constexpr uint64_t kRoomWaitMaxNs = 10 * kSec;
// "once the room has not grown for 2 s goes to host memory": an allocation
// of a holder waits longer, since a process asked to shrink that has no
// host memory made yet makes it group by group as it copies, and pinning
// a group of about 1 GiB takes a good part of a second while another
// process pins too (`driver_probes.py pin`).
inline constexpr uint64_t kAwaitRoomNs = 2 * kSec;

// ---- memory in host memory while holding ----

// "asks the driver every 200 ms whether the GPU has room now (128 MiB
// free beside the driver's)": more than one chunk, less than most waste.
inline constexpr uint64_t kPromotePollNs = 200 * kMs;
inline constexpr uint64_t kPromoteRoom = 128ull << 20;
// "Where no room came for 1 s, such a process also gives the GPU back at
// its next idle pause".
inline constexpr uint64_t kStrandedPatienceNs = 1 * kSec;

// ---- host memory made ahead ----

// "that of 2 chunks at a step": a step of host memory made ahead of a
// swap-out, during which the client thread does nothing else (nvshared's
// next Shrink waits for it). Two regions are made side by side, the second
// faulted in while the first is registered: `pin_rate` puts that
// `pipelined` way at 27 to 31 GB/s over many regions of 512 MiB, and one
// region at a time (`serial`) at 12 to 18 GB/s, on an H200 host of 16
// cores; with two, a step holds the thread not much longer than a single
// chunk's did and makes twice the memory.
inline constexpr uint64_t kPrestageChunks = 2;
// "once it has not changed for 250 ms": a holder whose memory changed this
// recently is still allocating (a fill), and a step between its
// allocations would hold up the next one's wait for room.
inline constexpr uint64_t kSettleBeforePrestageNs = 250 * kMs;
// "once ... its quantum ends within twice the time making it takes and
// 1 s": a swap-out at the quantum's end finds its host memory made (making
// it runs beside the program's work at up to about 30 GB/s on the H200
// host, `pin_rate`; twice that time covers a host where others pin too).
// Until then it looks again as often as an idle holder looks at its pause
// (kPauseLookNs), so a pause that outlasts the switch is seen.
inline constexpr uint64_t kQuantumLeadMakes = 2;
inline constexpr uint64_t kQuantumLeadNs = 1 * kSec;
// "for 2 GiB beyond that": host memory made ahead, beyond nvshared's
// latest Shrink, while the process waits.
inline constexpr uint64_t kShrinkAhead = 2ull << 30;

// ---- the host's memory (host_budget) ----

// "each of at most a quarter of what is available above a reserve of 1/32
// of the host's memory (at least 1 GiB)": up to four processes may pin at
// the same moment, and pinning past what the host has brings the OOM
// killer. "while less than 1/8 of the host's memory (at least twice the
// reserve) is available": the host runs low.
inline constexpr uint64_t kHostPinShare = 4;
inline constexpr uint64_t kHostReserveShare = 32;
inline constexpr uint64_t kHostReserveLeast = 1ull << 30;
inline constexpr uint64_t kHostLowShare = 8;

// ---- the program's work after a grant ----

// "The program's work waits for data the library evicted, at most 5 s".
inline constexpr uint64_t kSwapInGateLimitNs = 5 * kSec;

// ---- an idle holder (idle_gaps) ----

// "and at least 10 ms, also when it has none": the program's next call may
// come just after its wait for the GPU returns, and letting go at once
// raced that call.
inline constexpr uint64_t kShortHoldFloorNs = 10 * kMs;
// "it looks at least every 50 ms": work that resumes and pauses again
// during a long hold is seen, and the new pause timed from where it began.
inline constexpr uint64_t kPauseLookNs = 50 * kMs;

}  // namespace nvshare::preload::tuning
