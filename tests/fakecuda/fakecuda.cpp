// A fake libcuda.so.1 for CI machines without a GPU. It implements the
// subset of the driver API that libnvshare.so and the test programs use, with
// the CUDA 13 prototypes, and behaves like the driver where it matters for the
// tests:
//  - "device memory" is host memory; plain device allocations are limited to
//    the device's memory (FAKECUDA_MEMORY) per process, or, where
//    FAKECUDA_SHARED_DEVICE names a file, shared by every process that names
//    it (like a real GPU); managed ones are not;
//  - kernels, copies, memsets and prefetches run asynchronously on a worker
//    thread per stream and take a duration (kernel parameter 0 in
//    microseconds, else FAKECUDA_KERNEL_US; copies FAKECUDA_COPY_US);
//  - synchronising a context while one of its streams is capturing fails
//    and invalidates the capture, as on a real GPU;
//  - cuGetProcAddress[_v2] answers per (name, version, flags) with the
//    exported variant the real driver would choose;
//  - the VMM API moves data as the driver does: each cuMemCreate handle owns
//    real memory (a memfd; device-located ones count against the device's
//    memory), cuMemAddressReserve reserves inaccessible address space, and
//    cuMemMap / cuMemUnmap map the handle's memory at an address of a
//    reservation and take it away again, so data follows its handle from
//    one address to another; each cuMemMap takes FAKECUDA_MAP_US (default
//    0), before it takes the fake's lock, as a driver busy mapping would;
//  - cuMemHostRegister needs a live context current on the calling thread
//    (for the whole call), and takes as many microseconds as the file
//    FAKECUDA_REGISTER_DELAY names holds (none without it), as pinning takes
//    time; a context that dies logs `context-gone`;
//  - GPU work that would touch an address of a reservation where nothing is
//    mapped (or mapped without cuMemSetAccess) is an illegal address, as on
//    a GPU: the work does not run, a `fault` line is logged, and the context
//    fails every later call with CUDA_ERROR_ILLEGAL_ADDRESS (sticky);
//  - a context takes FAKECUDA_CONTEXT_BYTES (default 0) of its device's
//    memory while it lives, counted in what cuMemGetInfo calls used and
//    reported by no allocation, as a real context's memory is; creating or
//    retaining one on a full device fails with CUDA_ERROR_OUT_OF_MEMORY;
//  - fakecuda_escape_memset is work by a name no hook wraps (an escape
//    past the gate);
//  - access is per device (FAKECUDA_DEVICES of them): a kernel touches
//    memory as its stream's device, which needs cuMemSetAccess for that
//    device on VMM memory, and cuCtxEnablePeerAccess (from its device to the
//    owner's) on another device's cuMemAlloc memory. Copies and memsets
//    need access for some device. The kernel function 2 (kTouchKernel)
//    takes {&us, &ptr, &bytes} and reads and writes a byte in every page of
//    [ptr, ptr + bytes) when it runs (after checking them again); any other
//    function's kernels take {&us} and touch nothing;
//  - fakecuda_fail_next(call, error) makes the next cuMemCreate, cuMemMap or
//    cuMemSetAccess (`call`, by name) of the process fail with `error` and
//    do nothing, as a driver error other than a full device would; a `fail`
//    line is logged. Called by the program right before the call it means
//    (how many VMM calls come before it is the library's business).
// Every allocation, every cuMemCreate of device memory refused for a full
// device (`full vmm`), every cuMemGetInfo (`meminfo`) and every piece of GPU
// work is appended to $FAKECUDA_LOG (one line per event: CLOCK_MONOTONIC
// ns, pid, event...), so tests can tell from outside whether two processes'
// work overlapped, and when a process looked for device room.
#define __CUDA_API_VERSION_INTERNAL 1
#include <cuda.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <condition_variable>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#define FAKE_EXPORT extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kDriverVersion = 13000;

uint64_t now_ns()
{
    timespec ts{};
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t env_u64(const char* name, uint64_t fallback)
{
    const char* v = getenv(name);
    return v != nullptr && *v != '\0' ? strtoull(v, nullptr, 10) : fallback;
}

void log_event(const char* format, ...) __attribute__((format(printf, 1, 2)));
void log_event(const char* format, ...)
{
    const char* path = getenv("FAKECUDA_LOG");
    if (path == nullptr)
        return;
    char line[512];
    int n = snprintf(line, sizeof line, "%llu %d ", static_cast<unsigned long long>(now_ns()),
                     static_cast<int>(getpid()));
    va_list args;
    va_start(args, format);
    n += vsnprintf(line + n, sizeof line - static_cast<size_t>(n) - 1, format, args);
    va_end(args);
    line[n++] = '\n';
    // O_APPEND + one write per line: lines of concurrent processes never mix.
    const int fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644);
    if (fd >= 0) {
        ssize_t unused = write(fd, line, static_cast<size_t>(n));
        (void)unused;
        close(fd);
    }
}

struct Graph;
struct Context;

// Bytes that a piece of GPU work reads or writes: by a kernel, as the device
// of the stream it runs on; else (copies, memsets) any device with access
// will do.
struct Range {
    const void* start;
    size_t size;
    bool kernel = false;
};

struct Op {
    std::string name;
    uint64_t duration_us = 0;
    std::function<void()> action;
    // What `action` reads and writes: checked when the op is submitted (and
    // each time a graph that holds it is launched), see submit().
    std::vector<Range> touches{};
};

struct Stream {
    Context* ctx = nullptr;
    uint64_t id = 0;
    std::mutex mutex;
    std::condition_variable cv;
    std::deque<Op> queue;
    bool busy = false;
    // capture
    bool capturing = false;
    bool invalidated = false;
    Graph* graph = nullptr;      // the origin's: forked streams add to it
    Stream* origin = nullptr;    // a forked stream: whose capture it joined
    bool joined_back = false;    // a forked stream: the origin waited for it
    std::vector<Stream*> forks;  // the origin: streams that joined its capture
};

// An event recorded in a capturing stream forks the capture into any stream
// that waits for it; the origin must wait for an event recorded in each
// fork before the capture ends, or the end fails (UNJOINED).
struct Event {
    Stream* capture_origin = nullptr;
    Stream* recorded_on = nullptr;
    // Set when the work recorded before it has run (cuEventQuery).
    std::shared_ptr<std::atomic<bool>> done = std::make_shared<std::atomic<bool>>(true);
};

struct Graph {
    std::vector<Op> ops;
    uint64_t alloc_bytes = 0;    // memory allocation nodes (graph memory)
    bool pool_reserved = false;  // an exec's graph memory is in the pool
};

// The graph memory pool of the (single) fake device: what launched execs'
// allocation nodes reserved, until trimmed (as the driver keeps it for reuse).
std::atomic<uint64_t> g_graph_pool{0};

struct Context {
    CUdevice device = 0;
    bool primary = false;
    // False once destroyed (a primary context: released by all): work on
    // its streams then fails, as the library's swap-out found at an exit.
    std::atomic<bool> alive{true};
    int refs = 0;
    Stream* null_stream = nullptr;
    std::set<Stream*> streams;  // includes null_stream
    // Set when its work touched an illegal address: as on a GPU, the context
    // is lost for good and its calls fail with CUDA_ERROR_ILLEGAL_ADDRESS.
    std::atomic<bool> broken{false};
};

// Why work on `c`'s streams fails now, or CUDA_SUCCESS.
CUresult context_error(const Context* c)
{
    if (c->broken)
        return CUDA_ERROR_ILLEGAL_ADDRESS;
    return c->alive ? CUDA_SUCCESS : CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

struct Allocation {
    size_t size;
    CUdevice device;
    const char* kind;
    Context* context = nullptr;  // current when it was made
    uint64_t buffer_id = 0;
};

// A cuMemCreate handle: its memory is a memfd of `size` bytes (page-rounded),
// which cuMemMap maps wherever the caller asks.
struct Handle {
    size_t size;
    CUdevice device;   // -1: host memory (not counted as device memory)
    const char* kind;  // "vmm" or "vmm-host"
    int fd;
};

// Address space from cuMemAddressReserve: PROT_NONE where nothing is mapped.
struct Reservation {
    size_t size;
};

// A handle's memory [offset, offset + size) mapped at an address.
struct Mapping {
    size_t size;
    CUmemGenericAllocationHandle handle;
    size_t offset;
    uint64_t access = 0;     // the devices cuMemSetAccess let reach it, a bit each
    uint64_t buffer_id = 0;  // each mapping is a buffer of its own (a new ID each time)
};

struct State {
    std::mutex mutex;
    bool initialized = false;
    int device_count = 1;
    uint64_t memory = 16ull << 30;
    std::map<CUdevice, Context*> primary;
    std::map<CUdeviceptr, Allocation> allocations;
    std::map<CUmemGenericAllocationHandle, Handle> handles;
    // References to a handle: its creation, each retain, each mapping. The
    // memory goes with the last (cuMemRelease, cuMemUnmap).
    std::map<CUmemGenericAllocationHandle, int> handle_refs;
    std::map<CUdeviceptr, Reservation> reservations;  // by start address
    std::map<CUdeviceptr, Mapping> mappings;          // by start address
    std::map<uint64_t, Allocation> arrays;            // CUarray / CUmipmappedArray
    std::map<CUdevice, uint64_t> device_used;         // plain device memory in use
    // Page-locked host memory (cuMemHostRegister): size by start address.
    std::map<uintptr_t, size_t> host_registrations;
    // cuCtxEnablePeerAccess: (accessing device, owning device) pairs.
    std::set<std::pair<CUdevice, CUdevice>> peers;
    // fakecuda_fail_next: the error the next call of that name fails with.
    std::map<std::string, CUresult> fail_next;
    uint64_t next_stream_id = 1;
    uint64_t next_handle = 1;
    uint64_t next_op = 1;
    uint64_t next_buffer_id = 1;
};

// Leaked on purpose: worker threads may still run while the process exits.
State* g_state = nullptr;
pthread_once_t g_state_once = PTHREAD_ONCE_INIT;

std::mutex g_primary_mutex;
thread_local std::vector<Context*> t_stack;
thread_local CUstreamCaptureMode t_capture_mode = CU_STREAM_CAPTURE_MODE_GLOBAL;

void reset_in_child()
{
    g_state = new State();
    g_state->device_count = static_cast<int>(env_u64("FAKECUDA_DEVICES", 1));
    g_state->memory = env_u64("FAKECUDA_MEMORY", 16ull << 30);
    t_stack.clear();  // the parent's contexts do not exist here
}

void init_state()
{
    reset_in_child();
    pthread_atfork(nullptr, nullptr, reset_in_child);
}

State& st()
{
    pthread_once(&g_state_once, init_state);
    return *g_state;
}

Context* current()
{
    return t_stack.empty() ? nullptr : t_stack.back();
}

// Device memory is the process's own unless FAKECUDA_SHARED_DEVICE names a
// file: then every process that names it shares one device's memory, as
// processes on one real GPU do. The file holds a slot per process (its pid
// and what it uses on each device); a process that has ended counts no more,
// as the driver frees its memory. Updated under flock(), with st().mutex held.
constexpr int kSharedSlots = 64;
constexpr int kSharedDevices = 8;
struct SharedSlot {
    int64_t pid;
    uint64_t used[kSharedDevices];
};

bool alive(int64_t pid)
{
    return pid > 0 && (kill(static_cast<pid_t>(pid), 0) == 0 || errno == EPERM);
}

// The shared device's file (FAKECUDA_SHARED_DEVICE) opened and locked, with
// its slots read and summed for device `dev`; fd < 0 where the device is the
// process's own. The lock goes with the descriptor (close()).
struct SharedDevice {
    int fd = -1;
    SharedSlot slots[kSharedSlots] = {};
    uint64_t others = 0;  // what other live processes use of `dev`
    int own = -1;         // our slot, or -1
    int free_slot = -1;   // the first slot of no live process, or -1

    SharedDevice(CUdevice dev, int lock)
    {
        const char* path = getenv("FAKECUDA_SHARED_DEVICE");
        if (path == nullptr || *path == '\0' || dev < 0 || dev >= kSharedDevices)
            return;
        fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
            return;
        flock(fd, lock);
        const ssize_t got = pread(fd, slots, sizeof slots, 0);
        (void)got;  // a new file reads short: its slots stay zero
        for (int i = 0; i < kSharedSlots; ++i) {
            if (slots[i].pid == getpid())
                own = i;
            else if (alive(slots[i].pid))
                others += slots[i].used[dev];
            else if (free_slot < 0)
                free_slot = i;
        }
    }
    ~SharedDevice()
    {
        if (fd >= 0)
            close(fd);
    }
    SharedDevice(const SharedDevice&) = delete;
    SharedDevice& operator=(const SharedDevice&) = delete;
};

// Takes `size` bytes of device `dev` (false: the device is full), or gives
// them back (`take` false), counting every process that shares the device.
bool take_device_memory(CUdevice dev, uint64_t size, bool take)
{
    uint64_t& mine = st().device_used[dev];
    SharedDevice shared(dev, LOCK_EX);
    if (take && shared.others + mine + size > st().memory)
        return false;
    mine = take ? mine + size : mine - size;
    const int slot = shared.own >= 0 ? shared.own : shared.free_slot;
    if (shared.fd >= 0 && slot >= 0) {
        if (slot != shared.own)
            shared.slots[slot] = SharedSlot{getpid(), {}};
        shared.slots[slot].used[dev] = mine;
        const ssize_t put = pwrite(shared.fd, &shared.slots[slot], sizeof(SharedSlot),
                                   static_cast<off_t>(slot * sizeof(SharedSlot)));
        (void)put;
    }
    return true;
}

// What all processes sharing device `dev` use of it.
uint64_t device_used_by_all(CUdevice dev)
{
    return st().device_used[dev] + SharedDevice(dev, LOCK_SH).others;
}

CUresult check_access(Stream* s, const Op& op);

void worker(Stream* s)
{
    std::unique_lock<std::mutex> lock(s->mutex);
    for (;;) {
        s->cv.wait(lock, [s] { return !s->queue.empty(); });
        Op op = std::move(s->queue.front());
        s->queue.pop_front();
        s->busy = true;
        lock.unlock();
        uint64_t id;
        {
            std::lock_guard<std::mutex> g(st().mutex);
            id = st().next_op++;
        }
        // Unnamed ops (event markers) are not work: not logged.
        if (!op.name.empty())
            log_event("start %llu %s stream=%llu us=%llu", static_cast<unsigned long long>(id),
                      op.name.c_str(), static_cast<unsigned long long>(s->id),
                      static_cast<unsigned long long>(op.duration_us));
        if (op.duration_us != 0)
            usleep(static_cast<useconds_t>(op.duration_us));
        // Checked again as it runs: memory unmapped under queued or running
        // work faults then, as on a GPU (and the action never touches it).
        if (op.action && (op.touches.empty() || check_access(s, op) == CUDA_SUCCESS))
            op.action();
        if (!op.name.empty())
            log_event("end %llu %s", static_cast<unsigned long long>(id), op.name.c_str());
        lock.lock();
        s->busy = false;
        s->cv.notify_all();
    }
}

Stream* new_stream(Context* ctx)
{
    auto* s = new Stream();
    s->ctx = ctx;
    {
        std::lock_guard<std::mutex> g(st().mutex);
        s->id = st().next_stream_id++;
        ctx->streams.insert(s);
    }
    std::thread(worker, s).detach();
    return s;
}

// Takes (or gives back) a context's own memory on `dev`: false where the
// device is full.
bool charge_context(CUdevice dev, bool take)
{
    const uint64_t bytes = env_u64("FAKECUDA_CONTEXT_BYTES", 0);
    std::lock_guard<std::mutex> g(st().mutex);
    return bytes == 0 || take_device_memory(dev, bytes, take);
}

Context* new_context(CUdevice dev, bool primary)
{
    auto* c = new Context();
    c->device = dev;
    c->primary = primary;
    c->null_stream = new_stream(c);
    return c;
}

// The stream a handle means: 0, CU_STREAM_LEGACY and CU_STREAM_PER_THREAD are
// the current context's default stream.
Stream* resolve(CUstream h)
{
    if (h == nullptr || h == CU_STREAM_LEGACY || h == CU_STREAM_PER_THREAD) {
        Context* c = current();
        return c != nullptr ? c->null_stream : nullptr;
    }
    return reinterpret_cast<Stream*>(h);
}

void wait_idle(Stream* s)
{
    std::unique_lock<std::mutex> lock(s->mutex);
    s->cv.wait(lock, [s] { return s->queue.empty() && !s->busy; });
}

uint64_t copy_us()
{
    return env_u64("FAKECUDA_COPY_US", 200);
}

// The entry of `m` (start address -> something with a size) whose range
// holds `p`; end() if none. Callers hold st().mutex.
template <typename Map>
typename Map::iterator containing_in(Map& m, CUdeviceptr p)
{
    auto it = m.upper_bound(p);
    if (it == m.begin())
        return m.end();
    --it;
    return p - it->first < it->second.size ? it : m.end();
}

// Whether a mapping may be reached by `device` (-1: by some device).
bool reaches(const Mapping& m, int device)
{
    return device < 0 ? m.access != 0 : (m.access >> device & 1) != 0;
}

// The first address of [p, p + n) that `device` may not reach, or 0: where a
// GPU would fault. That is an address of a reservation in no mapping that
// `device` has access to, or, for a given device, of another device's plain
// allocation without peer access to it. Other addresses (host memory) are
// never checked, so this costs a lookup or two. Callers hold st().mutex.
CUdeviceptr illegal_address(CUdeviceptr p, size_t n, int device)
{
    if (device >= 0) {
        const auto a = containing_in(st().allocations, p);
        if (a != st().allocations.end() && strcmp(a->second.kind, "managed") != 0 &&
            a->second.device != device && st().peers.count({device, a->second.device}) == 0)
            return p;
    }
    auto& reservations = st().reservations;
    const CUdeviceptr end = p + n;
    auto r = containing_in(reservations, p);
    if (r == reservations.end())
        r = reservations.upper_bound(p);
    for (; r != reservations.end() && r->first < end; ++r) {
        CUdeviceptr at = std::max(p, r->first);
        const CUdeviceptr stop = std::min(end, r->first + r->second.size);
        while (at < stop) {
            auto m = containing_in(st().mappings, at);
            if (m == st().mappings.end() || !reaches(m->second, device))
                return at;
            at = m->first + m->second.size;
        }
    }
    return 0;
}

// Whether `op` may run on `s`: not if it touches an illegal address, which
// loses the context. Checked at submission (the call fails, as a memset on
// an unmapped address does on a GPU) and again when the op runs (worker):
// memory the library unmapped under queued work faults there.
CUresult check_access(Stream* s, const Op& op)
{
    CUdeviceptr bad = 0;
    {
        std::lock_guard<std::mutex> g(st().mutex);
        for (const Range& r : op.touches) {
            bad = illegal_address(reinterpret_cast<CUdeviceptr>(r.start), r.size,
                                  r.kernel ? s->ctx->device : -1);
            if (bad != 0)
                break;
        }
    }
    if (bad == 0)
        return CUDA_SUCCESS;
    log_event("fault %s 0x%llx", op.name.c_str(), static_cast<unsigned long long>(bad));
    s->ctx->broken = true;
    return CUDA_ERROR_ILLEGAL_ADDRESS;
}

// Puts work on a stream (or into its capture); waits for it if `sync`.
CUresult submit(CUstream h, Op op, bool sync)
{
    if (!st().initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    Stream* s = resolve(h);
    if (s == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (const CUresult lost = context_error(s->ctx); lost != CUDA_SUCCESS)
        return lost;
    bool capturing = false;
    {
        std::lock_guard<std::mutex> lock(s->mutex);
        capturing = s->capturing;
    }
    // Captured work runs (and is checked) when its graph is launched.
    if (!capturing) {
        const CUresult r = check_access(s, op);
        if (r != CUDA_SUCCESS)
            return r;
    }
    {
        std::lock_guard<std::mutex> lock(s->mutex);
        if (s->capturing) {
            if (sync) {
                s->invalidated = true;
                return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
            }
            s->graph->ops.push_back(std::move(op));
            return CUDA_SUCCESS;
        }
        // Queued, not started: how far a process runs ahead of the GPU.
        // (No name: counting a call's lines must not count this one.)
        log_event("queue stream=%llu", static_cast<unsigned long long>(s->id));
        s->queue.push_back(std::move(op));
        s->cv.notify_all();
    }
    if (sync)
        wait_idle(s);
    return context_error(s->ctx);  // the work, or a release of the context, may have ended it
}

uint64_t kernel_us(void** params)
{
    if (params != nullptr && params[0] != nullptr)
        return *static_cast<uint32_t*>(params[0]);
    return env_u64("FAKECUDA_KERNEL_US", 2000);
}

// The kernel function that touches memory (see the top of this file).
const CUfunction kTouchKernel = reinterpret_cast<CUfunction>(2);

// A launch of `f` with `params`: an op of `us` (kernel_us) that, for
// kTouchKernel, reads and writes a byte of every page it is given.
Op kernel_op(const char* name, CUfunction f, void** params)
{
    Op op{name, kernel_us(params), {}};
    if (f != kTouchKernel || params == nullptr || params[1] == nullptr || params[2] == nullptr)
        return op;
    auto* start = reinterpret_cast<volatile char*>(*static_cast<CUdeviceptr*>(params[1]));
    const size_t bytes = *static_cast<uint64_t*>(params[2]);
    op.touches.push_back({const_cast<const char*>(start), bytes, true});
    op.action = [start, bytes] {
        for (size_t at = 0; at < bytes; at += 4096)
            start[at] = start[at];
    };
    return op;
}

void* map_memory(size_t size)
{
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? nullptr : p;
}

CUresult allocate(CUdeviceptr* dptr, size_t size, const char* kind, bool device_memory,
                  const char* api)
{
    if (!st().initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    if (dptr == nullptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    Context* c = current();
    if (c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (const CUresult e = context_error(c); e != CUDA_SUCCESS)
        return e;  // sticky, as on a GPU
    std::lock_guard<std::mutex> g(st().mutex);
    void* p = map_memory(size);
    if (p == nullptr)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (device_memory && !take_device_memory(c->device, size, true)) {
        munmap(p, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *dptr = reinterpret_cast<CUdeviceptr>(p);
    st().allocations[*dptr] = {size, c->device, kind, c, st().next_buffer_id++};
    log_event("alloc %s %zu %s", kind, size, api);
    return CUDA_SUCCESS;
}

CUresult release(CUdeviceptr dptr, const char* api)
{
    if (!st().initialized)
        return CUDA_ERROR_NOT_INITIALIZED;
    std::lock_guard<std::mutex> g(st().mutex);
    auto it = st().allocations.find(dptr);
    if (it == st().allocations.end())
        return CUDA_ERROR_INVALID_VALUE;
    if (strcmp(it->second.kind, "managed") != 0)
        take_device_memory(it->second.device, it->second.size, false);
    log_event("free %s %zu %s", it->second.kind, it->second.size, api);
    munmap(reinterpret_cast<void*>(dptr), it->second.size);
    st().allocations.erase(it);
    return CUDA_SUCCESS;
}

CUresult sync_context(Context* c)
{
    if (c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (const CUresult lost = context_error(c); lost != CUDA_SUCCESS)
        return lost;
    std::vector<Stream*> streams;
    {
        std::lock_guard<std::mutex> g(st().mutex);
        streams.assign(c->streams.begin(), c->streams.end());
    }
    for (Stream* s : streams) {
        std::lock_guard<std::mutex> lock(s->mutex);
        if (s->capturing) {
            s->invalidated = true;  // a context sync is illegal during capture
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    for (Stream* s : streams)
        wait_idle(s);
    return context_error(c);
}

#if defined(__SANITIZE_THREAD__)
// Under ThreadSanitizer its memmove interceptor checks every 8 bytes of both
// ranges, which makes the fake's copies many times slower and the swap
// engine's end-to-end tests minutes long, though what TSan is there for is
// libnvshare.so's threads. So the bytes move uninstrumented, and TSan
// sees one read of the source and one write of the destination at both ends
// of each range and every 64 KiB in it, at 64 KiB-aligned addresses: two
// copies that share such an address meet there (the swap engine moves
// chunks of 64 MiB). A sample every 4 KiB instead: 38 s for the longest
// swap test, not 24 s (72 s with memmove, 12 s without TSan).
constexpr uintptr_t kSampleStep = 64 * 1024;

// Not instrumented; and no loop that gcc may turn into a call of memmove
// (which TSan intercepts).
__attribute__((no_sanitize("thread"), optimize("no-tree-loop-distribute-patterns"))) void
move_uninstrumented(unsigned char* dst, const unsigned char* src, size_t n)
{
    if (dst <= src || dst >= src + n) {
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            __builtin_memcpy(&w, src + i, 8);
            __builtin_memcpy(dst + i, &w, 8);
        }
        for (; i < n; ++i)
            dst[i] = src[i];
    } else {
        size_t i = n;
        for (; i >= 8; i -= 8) {
            uint64_t w;
            __builtin_memcpy(&w, src + i - 8, 8);
            __builtin_memcpy(dst + i - 8, &w, 8);
        }
        for (; i > 0; --i)
            dst[i - 1] = src[i - 1];
    }
}

// Calls f(address) for both ends of [p, p + n) and every address in it
// that is a multiple of kSampleStep.
template <typename F>
void each_sample(const void* p, size_t n, F f)
{
    const auto begin = reinterpret_cast<uintptr_t>(p);
    f(begin);
    f(begin + n - 1);
    for (uintptr_t a = (begin + kSampleStep - 1) & ~(kSampleStep - 1); a < begin + n;
         a += kSampleStep)
        f(a);
}

void move_bytes(void* dst, const void* src, size_t n)
{
    if (n == 0)
        return;
    move_uninstrumented(static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src),
                        n);
    // Instrumented accesses that TSan checks against the other threads'.
    each_sample(src, n, [](uintptr_t a) { (void)*reinterpret_cast<const volatile char*>(a); });
    each_sample(dst, n, [](uintptr_t a) {
        auto* c = reinterpret_cast<volatile char*>(a);
        *c = *c;
    });
}
#else
void move_bytes(void* dst, const void* src, size_t n)
{
    memmove(dst, src, n);
}
#endif

CUresult copy(CUstream stream, void* dst, const void* src, size_t n, const char* api, bool sync)
{
    return submit(stream, {api, copy_us(), [=] { move_bytes(dst, src, n); }, {{dst, n}, {src, n}}},
                  sync);
}

CUresult set(CUstream stream, void* dst, const void* value, size_t element, size_t count,
             const char* api, bool sync)
{
    uint64_t v = 0;
    memcpy(&v, value, element);
    return submit(stream,
                  {api,
                   copy_us(),
                   [=] {
                       // One element, then the filled part copied onto
                       // the rest, doubling: a call per element is most of
                       // a sanitizer run's time on a large memset.
                       auto* p = static_cast<unsigned char*>(dst);
                       const size_t total = count * element;
                       if (element == 1) {
                           memset(p, static_cast<int>(v), total);
                           return;
                       }
                       if (total == 0)
                           return;
                       memcpy(p, &v, element);
                       for (size_t done = element; done < total;) {
                           const size_t n = std::min(done, total - done);
                           memcpy(p + done, p, n);
                           done += n;
                       }
                   },
                   {{dst, count * element}}},
                  sync);
}

void* ptr(CUdeviceptr d)
{
    return reinterpret_cast<void*>(d);
}

// As on a driver or GPU without host-located VMM memory, with
// FAKECUDA_NO_HOST_VMM=1: what the library must fall back from.
bool host_vmm_supported()
{
    return env_u64("FAKECUDA_NO_HOST_VMM", 0) == 0;
}

}  // namespace

// ---- initialisation and devices ---------------------------------------------------

FAKE_EXPORT CUresult cuInit(unsigned int)
{
    st().initialized = true;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDriverGetVersion(int* v)
{
    if (v == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    *v = kDriverVersion;
    return CUDA_SUCCESS;
}

#define REQUIRE_INIT()     \
    if (!st().initialized) \
    return CUDA_ERROR_NOT_INITIALIZED

#define REQUIRE_DEVICE(dev)                      \
    REQUIRE_INIT();                              \
    if ((dev) < 0 || (dev) >= st().device_count) \
    return CUDA_ERROR_INVALID_DEVICE

FAKE_EXPORT CUresult cuDeviceGetCount(int* count)
{
    REQUIRE_INIT();
    *count = st().device_count;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGet(CUdevice* dev, int ordinal)
{
    REQUIRE_DEVICE(ordinal);
    *dev = ordinal;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetName(char* name, int len, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    snprintf(name, static_cast<size_t>(len), "Fake GPU %d", dev);
    return CUDA_SUCCESS;
}

static void fake_uuid(CUuuid* uuid, CUdevice dev)
{
    for (int i = 0; i < 16; ++i)
        uuid->bytes[i] = static_cast<char>(0xf0 + i);
    uuid->bytes[15] = static_cast<char>(dev);
}

FAKE_EXPORT CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    fake_uuid(uuid, dev);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    fake_uuid(uuid, dev);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    *bytes = st().memory;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetAttribute(int* value, CUdevice_attribute attr, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    switch (attr) {
        case CU_DEVICE_ATTRIBUTE_CONCURRENT_MANAGED_ACCESS:
            // As on some virtualised or older setups, with FAKECUDA_NO_CONCURRENT_MANAGED=1.
            *value = env_u64("FAKECUDA_NO_CONCURRENT_MANAGED", 0) != 0 ? 0 : 1;
            break;
        case CU_DEVICE_ATTRIBUTE_MANAGED_MEMORY:
            *value = 1;
            break;
        case CU_DEVICE_ATTRIBUTE_TEXTURE_PITCH_ALIGNMENT:
            *value = 32;
            break;
        case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
            *value = 1;
            break;
        case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
            *value = host_vmm_supported() ? 1 : 0;
            break;
        default:
            *value = 0;
    }
    return CUDA_SUCCESS;
}

// ---- contexts ----------------------------------------------------------------------

FAKE_EXPORT CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    std::lock_guard<std::mutex> g(g_primary_mutex);  // new_context takes st().mutex itself
    Context*& c = st().primary[dev];
    if ((c == nullptr || c->refs == 0) && !charge_context(dev, true))
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (c == nullptr)
        c = new_context(dev, true);
    if (c->refs == 0)
        c->broken = false;  // released by all, so retained anew: a fresh context
    c->refs++;
    c->alive = true;
    *pctx = reinterpret_cast<CUcontext>(c);
    return CUDA_SUCCESS;
}

static CUresult primary_release(CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    std::lock_guard<std::mutex> g(g_primary_mutex);
    Context* c = st().primary[dev];
    if (c == nullptr || c->refs == 0)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (--c->refs == 0) {
        c->alive = false;
        log_event("context-gone primary");
        charge_context(dev, false);
    }
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev)
{
    return primary_release(dev);
}

static CUresult create_context(CUcontext* pctx, CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    if (pctx == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!charge_context(dev, true))
        return CUDA_ERROR_OUT_OF_MEMORY;
    Context* c = new_context(dev, false);
    t_stack.push_back(c);
    *pctx = reinterpret_cast<CUcontext>(c);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int, CUdevice dev)
{
    return create_context(pctx, dev);
}

FAKE_EXPORT CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams*, unsigned int, CUdevice dev)
{
    return create_context(pctx, dev);
}

FAKE_EXPORT CUresult cuCtxDestroy_v2(CUcontext ctx)
{
    REQUIRE_INIT();
    auto* c = reinterpret_cast<Context*>(ctx);
    if (c == nullptr || !c->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    sync_context(c);
    c->alive = false;
    log_event("context-gone");
    if (!c->primary)
        charge_context(c->device, false);
    for (auto it = t_stack.begin(); it != t_stack.end();)
        it = *it == c ? t_stack.erase(it) : it + 1;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetCurrent(CUcontext* pctx)
{
    REQUIRE_INIT();
    *pctx = reinterpret_cast<CUcontext>(current());
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSetCurrent(CUcontext ctx)
{
    REQUIRE_INIT();
    if (ctx == nullptr) {
        if (!t_stack.empty())
            t_stack.pop_back();
        return CUDA_SUCCESS;
    }
    if (t_stack.empty())
        t_stack.push_back(reinterpret_cast<Context*>(ctx));
    else
        t_stack.back() = reinterpret_cast<Context*>(ctx);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxPushCurrent_v2(CUcontext ctx)
{
    REQUIRE_INIT();
    auto* c = reinterpret_cast<Context*>(ctx);
    if (c == nullptr || !c->alive)
        return CUDA_ERROR_INVALID_CONTEXT;
    t_stack.push_back(c);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxPopCurrent_v2(CUcontext* pctx)
{
    REQUIRE_INIT();
    if (t_stack.empty())
        return CUDA_ERROR_INVALID_CONTEXT;
    if (pctx != nullptr)
        *pctx = reinterpret_cast<CUcontext>(t_stack.back());
    t_stack.pop_back();
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxGetDevice(CUdevice* dev)
{
    REQUIRE_INIT();
    Context* c = current();
    if (c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    *dev = c->device;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceCanAccessPeer(int* can, CUdevice dev, CUdevice peer)
{
    REQUIRE_INIT();
    if (can == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (dev < 0 || dev >= st().device_count || peer < 0 || peer >= st().device_count)
        return CUDA_ERROR_INVALID_DEVICE;
    *can = dev != peer;
    return CUDA_SUCCESS;
}

// The current context's device may reach the cuMemAlloc memory of
// `peer`'s device, as the driver: once per pair, not to itself.
FAKE_EXPORT CUresult cuCtxEnablePeerAccess(CUcontext peer, unsigned int flags)
{
    REQUIRE_INIT();
    Context* c = current();
    if (c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (peer == nullptr || flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    const CUdevice owner = reinterpret_cast<Context*>(peer)->device;
    if (owner == c->device)
        return CUDA_ERROR_INVALID_DEVICE;
    std::lock_guard<std::mutex> g(st().mutex);
    if (!st().peers.insert({c->device, owner}).second)
        return CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED;
    log_event("peer-access %d %d on", c->device, owner);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxDisablePeerAccess(CUcontext peer)
{
    REQUIRE_INIT();
    Context* c = current();
    if (c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (peer == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(st().mutex);
    const CUdevice owner = reinterpret_cast<Context*>(peer)->device;
    if (st().peers.erase({c->device, owner}) == 0)
        return CUDA_ERROR_PEER_ACCESS_NOT_ENABLED;
    log_event("peer-access %d %d off", c->device, owner);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuCtxSynchronize()
{
    REQUIRE_INIT();
    return sync_context(current());
}

// ---- streams and capture ------------------------------------------------------------

// As the driver does, a stream takes device memory beside every allocation,
// and cannot be made on a device that is full.
constexpr uint64_t kStreamBytes = 2ull << 20;

FAKE_EXPORT CUresult cuStreamCreate(CUstream* ps, unsigned int)
{
    REQUIRE_INIT();
    Context* c = current();
    if (c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    {
        std::lock_guard<std::mutex> g(st().mutex);
        if (!take_device_memory(c->device, kStreamBytes, true)) {
            log_event("stream-create oom");
            return CUDA_ERROR_OUT_OF_MEMORY;
        }
    }
    *ps = reinterpret_cast<CUstream>(new_stream(c));
    return CUDA_SUCCESS;
}

// The driver takes the context of work on an explicit stream from the
// stream, so such calls work with no current context (see submit()).
FAKE_EXPORT CUresult cuStreamGetCtx(CUstream s, CUcontext* pctx)
{
    REQUIRE_INIT();
    Stream* str = resolve(s);
    if (str == nullptr || pctx == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    *pctx = reinterpret_cast<CUcontext>(str->ctx);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamDestroy_v2(CUstream s)
{
    REQUIRE_INIT();
    Stream* str = resolve(s);
    if (str == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    wait_idle(str);
    std::lock_guard<std::mutex> g(st().mutex);
    take_device_memory(str->ctx->device, kStreamBytes, false);
    str->ctx->streams.erase(str);  // the worker thread stays parked (leaked)
    return CUDA_SUCCESS;
}

static CUresult stream_sync(CUstream s)
{
    REQUIRE_INIT();
    Stream* str = resolve(s);
    if (str == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (const CUresult lost = context_error(str->ctx); lost != CUDA_SUCCESS)
        return lost;
    {
        std::lock_guard<std::mutex> lock(str->mutex);
        if (str->capturing) {
            str->invalidated = true;
            return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;
        }
    }
    wait_idle(str);
    return context_error(str->ctx);  // the work, or a release of the context, may have ended it
}

FAKE_EXPORT CUresult cuStreamSynchronize(CUstream s)
{
    return stream_sync(s);
}
FAKE_EXPORT CUresult cuStreamSynchronize_ptsz(CUstream s)
{
    return stream_sync(s == nullptr ? CU_STREAM_PER_THREAD : s);
}

static CUresult stream_query(CUstream s)
{
    REQUIRE_INIT();
    Stream* str = resolve(s);
    if (str == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (const CUresult lost = context_error(str->ctx); lost != CUDA_SUCCESS)
        return lost;
    std::lock_guard<std::mutex> lock(str->mutex);
    return str->queue.empty() && !str->busy ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

FAKE_EXPORT CUresult cuStreamQuery(CUstream s)
{
    return stream_query(s);
}
FAKE_EXPORT CUresult cuStreamQuery_ptsz(CUstream s)
{
    return stream_query(s);
}

static CUresult begin_capture(CUstream s, CUstreamCaptureMode)
{
    REQUIRE_INIT();
    if (s == nullptr || s == CU_STREAM_LEGACY)
        return CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED;  // the legacy stream cannot capture
    Stream* str = resolve(s);
    std::lock_guard<std::mutex> lock(str->mutex);
    if (str->capturing)
        return CUDA_ERROR_ILLEGAL_STATE;
    str->capturing = true;
    str->invalidated = false;
    str->graph = new Graph();
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamBeginCapture(CUstream s)
{
    return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
FAKE_EXPORT CUresult cuStreamBeginCapture_ptsz(CUstream s)
{
    return begin_capture(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
}
FAKE_EXPORT CUresult cuStreamBeginCapture_v2(CUstream s, CUstreamCaptureMode mode)
{
    return begin_capture(s, mode);
}
FAKE_EXPORT CUresult cuStreamBeginCapture_v2_ptsz(CUstream s, CUstreamCaptureMode mode)
{
    return begin_capture(s, mode);
}

static CUresult end_capture(CUstream s, CUgraph* graph)
{
    REQUIRE_INIT();
    Stream* str = resolve(s);
    if (str == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    std::vector<Stream*> forks;
    bool unjoined = false;
    {
        std::lock_guard<std::mutex> lock(str->mutex);
        if (!str->capturing || str->origin != nullptr)
            return CUDA_ERROR_ILLEGAL_STATE;
        forks.swap(str->forks);
    }
    // The capture ends for every stream that joined it, joined back or not.
    for (Stream* f : forks) {
        std::lock_guard<std::mutex> lock(f->mutex);
        unjoined = unjoined || !f->joined_back;
        f->capturing = false;
        f->graph = nullptr;
        f->origin = nullptr;
    }
    std::lock_guard<std::mutex> lock(str->mutex);
    str->capturing = false;
    if (str->invalidated || unjoined) {
        delete str->graph;
        str->graph = nullptr;
        return unjoined ? CUDA_ERROR_STREAM_CAPTURE_UNJOINED
                        : CUDA_ERROR_STREAM_CAPTURE_INVALIDATED;
    }
    *graph = reinterpret_cast<CUgraph>(str->graph);
    str->graph = nullptr;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventCreate(CUevent* ev, unsigned int)
{
    REQUIRE_INIT();
    if (ev == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    *ev = reinterpret_cast<CUevent>(new Event());
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventRecord(CUevent ev, CUstream s)
{
    REQUIRE_INIT();
    auto* e = reinterpret_cast<Event*>(ev);
    Stream* str = resolve(s);
    if (e == nullptr || str == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    if (const CUresult lost = context_error(str->ctx); lost != CUDA_SUCCESS)
        return lost;
    std::lock_guard<std::mutex> lock(str->mutex);
    e->recorded_on = str;
    e->capture_origin = !str->capturing ? nullptr : str->origin != nullptr ? str->origin : str;
    if (!str->capturing) {
        // Done once the work queued before it has run.
        auto done = std::make_shared<std::atomic<bool>>(false);
        e->done = done;
        str->queue.push_back(Op{"", 0, [done] { done->store(true); }});
        str->cv.notify_all();
    }
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuEventQuery(CUevent ev)
{
    REQUIRE_INIT();
    auto* e = reinterpret_cast<Event*>(ev);
    if (e == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    if (e->recorded_on != nullptr)
        if (const CUresult lost = context_error(e->recorded_on->ctx); lost != CUDA_SUCCESS)
            return lost;
    std::unique_lock<std::mutex> lock;  // cuEventRecord replaces `done` under the stream's lock
    if (e->recorded_on != nullptr)
        lock = std::unique_lock<std::mutex>(e->recorded_on->mutex);
    return e->done->load() ? CUDA_SUCCESS : CUDA_ERROR_NOT_READY;
}

// Waits for the work queued before the event's latest record (the event
// alone, not the whole stream: the swap engine frees memory group by group).
FAKE_EXPORT CUresult cuEventSynchronize(CUevent ev)
{
    REQUIRE_INIT();
    for (;;) {
        const CUresult r = cuEventQuery(ev);
        if (r != CUDA_ERROR_NOT_READY)
            return r;
        const timespec pause{0, 200000};
        nanosleep(&pause, nullptr);
    }
}

FAKE_EXPORT CUresult cuStreamWaitEvent(CUstream s, CUevent ev, unsigned int)
{
    REQUIRE_INIT();
    auto* e = reinterpret_cast<Event*>(ev);
    Stream* str = resolve(s);
    if (e == nullptr || str == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    Stream* origin = e->capture_origin;
    if (origin == nullptr)
        return CUDA_SUCCESS;  // ordering only: the fake runs streams independently
    if (str == origin) {      // joins a fork back
        std::lock_guard<std::mutex> lock(e->recorded_on->mutex);
        if (e->recorded_on != origin)
            e->recorded_on->joined_back = true;
        return CUDA_SUCCESS;
    }
    Graph* graph = nullptr;
    {
        std::lock_guard<std::mutex> lock(origin->mutex);
        graph = origin->graph;
        origin->forks.push_back(str);
    }
    std::lock_guard<std::mutex> lock(str->mutex);
    if (str->capturing)
        return CUDA_SUCCESS;
    str->capturing = true;
    str->invalidated = false;
    str->origin = origin;
    str->joined_back = false;
    str->graph = graph;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamEndCapture(CUstream s, CUgraph* g)
{
    return end_capture(s, g);
}
FAKE_EXPORT CUresult cuStreamEndCapture_ptsz(CUstream s, CUgraph* g)
{
    return end_capture(s, g);
}

static CUresult is_capturing(CUstream s, CUstreamCaptureStatus* status)
{
    REQUIRE_INIT();
    Stream* str = resolve(s);
    if (str == nullptr || status == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> lock(str->mutex);
    *status = !str->capturing    ? CU_STREAM_CAPTURE_STATUS_NONE
              : str->invalidated ? CU_STREAM_CAPTURE_STATUS_INVALIDATED
                                 : CU_STREAM_CAPTURE_STATUS_ACTIVE;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuStreamIsCapturing(CUstream s, CUstreamCaptureStatus* status)
{
    return is_capturing(s, status);
}
FAKE_EXPORT CUresult cuStreamIsCapturing_ptsz(CUstream s, CUstreamCaptureStatus* status)
{
    return is_capturing(s, status);
}

FAKE_EXPORT CUresult cuStreamGetCaptureInfo(CUstream s, CUstreamCaptureStatus* status,
                                            cuuint64_t* id)
{
    if (id != nullptr)
        *id = 0;
    return is_capturing(s, status);
}

FAKE_EXPORT CUresult cuThreadExchangeStreamCaptureMode(CUstreamCaptureMode* mode)
{
    if (mode == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    const CUstreamCaptureMode old = t_capture_mode;
    t_capture_mode = *mode;
    *mode = old;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphInstantiateWithFlags(CUgraphExec* exec, CUgraph graph,
                                                 unsigned long long)
{
    REQUIRE_INIT();
    *exec = reinterpret_cast<CUgraphExec>(new Graph(*reinterpret_cast<Graph*>(graph)));
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphCreate(CUgraph* graph, unsigned int)
{
    REQUIRE_INIT();
    *graph = reinterpret_cast<CUgraph>(new Graph());
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphAddMemAllocNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*,
                                            size_t, CUDA_MEM_ALLOC_NODE_PARAMS* params)
{
    REQUIRE_INIT();
    if (graph == nullptr || params == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    auto* g = reinterpret_cast<Graph*>(graph);
    g->alloc_bytes += params->bytesize;
    params->dptr = 0x7f0000000000ull + g->alloc_bytes;  // an address, never dereferenced
    if (node != nullptr)
        *node = nullptr;
    return CUDA_SUCCESS;
}

// A lost context answers queries of its state with its sticky error, as the
// driver does (its VMM calls do not: they still succeed).
FAKE_EXPORT CUresult cuCtxGetLimit(size_t* value, CUlimit limit)
{
    REQUIRE_INIT();
    const Context* c = current();
    if (c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (value == nullptr || limit != CU_LIMIT_STACK_SIZE)
        return CUDA_ERROR_INVALID_VALUE;
    if (const CUresult e = context_error(c); e != CUDA_SUCCESS)
        return e;
    *value = 1024;
    return CUDA_SUCCESS;
}

// As the driver: the memory a memset node writes must be memory it knows
// when the node is made (mapped, with access for some device), else
// CUDA_ERROR_INVALID_VALUE; the node runs (and is checked again) at each
// launch of the graph's exec.
FAKE_EXPORT CUresult cuGraphAddMemsetNode(CUgraphNode* node, CUgraph graph, const CUgraphNode*,
                                          size_t, const CUDA_MEMSET_NODE_PARAMS* params, CUcontext)
{
    REQUIRE_INIT();
    if (graph == nullptr || params == nullptr || params->height != 1 ||
        (params->elementSize != 1 && params->elementSize != 2 && params->elementSize != 4))
        return CUDA_ERROR_INVALID_VALUE;
    const size_t element = params->elementSize, count = params->width;
    const CUdeviceptr dst = params->dst;
    {
        std::lock_guard<std::mutex> g(st().mutex);
        if (illegal_address(dst, element * count, -1) != 0)
            return CUDA_ERROR_INVALID_VALUE;
    }
    const uint64_t v = params->value;
    reinterpret_cast<Graph*>(graph)->ops.push_back(
        {"memset-node",
         copy_us(),
         [=] {
             auto* p = reinterpret_cast<unsigned char*>(dst);
             for (size_t i = 0; i < count; ++i)
                 memcpy(p + i * element, &v, element);
         },
         {{reinterpret_cast<const void*>(dst), element * count}}});
    if (node != nullptr)
        *node = nullptr;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGetGraphMemAttribute(CUdevice dev, CUgraphMem_attribute attr,
                                                  void* value)
{
    REQUIRE_DEVICE(dev);
    if (value == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    const bool reserved = attr == CU_GRAPH_MEM_ATTR_RESERVED_MEM_CURRENT ||
                          attr == CU_GRAPH_MEM_ATTR_USED_MEM_CURRENT;
    *static_cast<cuuint64_t*>(value) = reserved ? g_graph_pool.load() : 0;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuDeviceGraphMemTrim(CUdevice dev)
{
    REQUIRE_DEVICE(dev);
    g_graph_pool = 0;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphDestroy(CUgraph graph)
{
    delete reinterpret_cast<Graph*>(graph);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphExecDestroy(CUgraphExec exec)
{
    delete reinterpret_cast<Graph*>(exec);
    return CUDA_SUCCESS;
}

static CUresult graph_launch(CUgraphExec exec, CUstream s, const char* api)
{
    auto* g = reinterpret_cast<Graph*>(exec);
    if (g == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (!g->pool_reserved) {
        g->pool_reserved = true;
        g_graph_pool += g->alloc_bytes;
    }
    // A large graph takes the driver a while to put on the GPU: its first
    // nodes may run while the launch call is still submitting the rest.
    const uint64_t submit_us = env_u64("FAKECUDA_GRAPH_SUBMIT_US", 0);
    for (const Op& op : g->ops) {
        if (submit_us != 0)
            usleep(static_cast<useconds_t>(submit_us));
        Op copy = op;
        copy.name = std::string(api) + ":" + op.name;
        const CUresult r = submit(s, std::move(copy), false);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGraphLaunch(CUgraphExec e, CUstream s)
{
    return graph_launch(e, s, "cuGraphLaunch");
}
FAKE_EXPORT CUresult cuGraphLaunch_ptsz(CUgraphExec e, CUstream s)
{
    return graph_launch(e, s == nullptr ? CU_STREAM_PER_THREAD : s, "cuGraphLaunch_ptsz");
}

// ---- memory -------------------------------------------------------------------------

FAKE_EXPORT CUresult cuMemAlloc(CUdeviceptr_v1*, unsigned int)
{
    return CUDA_ERROR_NOT_SUPPORTED;  // the 32-bit ABI of CUDA < 3.2
}

FAKE_EXPORT CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t size)
{
    return allocate(dptr, size, "device", true, "cuMemAlloc_v2");
}

FAKE_EXPORT CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pitch, size_t width,
                                        size_t height, unsigned int element)
{
    if (pitch == nullptr || (element != 4 && element != 8 && element != 16))
        return CUDA_ERROR_INVALID_VALUE;
    *pitch = (width + 511) / 512 * 512;
    return allocate(dptr, *pitch * height, "device", true, "cuMemAllocPitch_v2");
}

FAKE_EXPORT CUresult cuMemAllocManaged(CUdeviceptr* dptr, size_t size, unsigned int)
{
    return allocate(dptr, size, "managed", false, "cuMemAllocManaged");
}

// As on a real GPU: IPC exports device memory, never managed memory.
FAKE_EXPORT CUresult cuIpcGetMemHandle(CUipcMemHandle* handle, CUdeviceptr dptr)
{
    if (handle == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(st().mutex);
    auto it = st().allocations.find(dptr);
    if (it == st().allocations.end() || strcmp(it->second.kind, "device") != 0)
        return CUDA_ERROR_INVALID_VALUE;
    memset(handle, 0, sizeof *handle);
    memcpy(handle->reserved, &dptr, sizeof dptr);
    log_event("ipc export %zu", it->second.size);
    return CUDA_SUCCESS;
}

// The allocation `ptr` points into (any address of it); end() if none.
// Callers hold st().mutex.
static std::map<CUdeviceptr, Allocation>::iterator containing(CUdeviceptr ptr)
{
    return containing_in(st().allocations, ptr);
}

// As on a real GPU: GPUDirect RDMA (dma-buf export, nvidia-peermem's
// tokens) takes device memory, never managed memory.
FAKE_EXPORT CUresult cuMemGetHandleForAddressRange(void* handle, CUdeviceptr dptr, size_t size,
                                                   CUmemRangeHandleType type, unsigned long long)
{
    REQUIRE_INIT();
    if (handle == nullptr || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(st().mutex);
    auto it = containing(dptr);
    if (it == st().allocations.end() || strcmp(it->second.kind, "device") != 0 || size == 0 ||
        size > it->second.size - (dptr - it->first))
        return CUDA_ERROR_INVALID_VALUE;
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);  // stands for the dma-buf
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    *static_cast<int*>(handle) = fd;
    log_event("dmabuf export %zu", size);
    return CUDA_SUCCESS;
}

// A pointer into a VMM mapping: device memory whose range is the mapping
// (as the driver answers for VMM), wherever its handle's memory lives.
// What the driver says of a buffer (all zero for an unknown pointer).
struct Buffer {
    unsigned int type = 0;  // CUmemorytype
    Context* context = nullptr;
    uint64_t id = 0;
    int ordinal = -1;
    CUdeviceptr start = 0;
    size_t size = 0;
    unsigned int managed = 0, rdma = 0;
};

// Writes the attributes that every buffer has; false for the others.
static bool buffer_attribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr,
                             const Buffer& b)
{
    switch (attribute) {
        case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
            *static_cast<unsigned int*>(data) = b.type;
            return true;
        case CU_POINTER_ATTRIBUTE_CONTEXT:
            *static_cast<CUcontext*>(data) = reinterpret_cast<CUcontext>(b.context);
            return true;
        case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
            *static_cast<CUdeviceptr*>(data) = b.type != 0 ? ptr : 0;
            return true;
        case CU_POINTER_ATTRIBUTE_BUFFER_ID:
            *static_cast<unsigned long long*>(data) = b.id;
            return true;
        case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
            *static_cast<int*>(data) = b.ordinal;
            return true;
        case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
            *static_cast<CUdeviceptr*>(data) = b.start;
            return true;
        case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
            *static_cast<size_t*>(data) = b.size;
            return true;
        case CU_POINTER_ATTRIBUTE_IS_MANAGED:
            *static_cast<unsigned int*>(data) = b.managed;
            return true;
        case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
            *static_cast<unsigned int*>(data) = b.rdma;
            return true;
        default:
            return false;
    }
}

// The attributes the tests ask for, as the driver answers them: for VMM
// memory no context, the memory type of where the handle's memory is
// (host-located: host), a buffer ID per mapping, not RDMA-capable (not asked
// for at cuMemCreate). Unknown pointers (a reserved address where nothing is
// mapped included): an error from cuPointerGetAttribute, zeros from
// cuPointerGetAttributes (as the driver).
static CUresult pointer_attribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr,
                                  bool zero_if_unknown)
{
    if (auto m = containing_in(st().mappings, ptr); m != st().mappings.end()) {
        const Handle& h = st().handles.at(m->second.handle);
        const Buffer b{h.device < 0 ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE,
                       nullptr,
                       m->second.buffer_id,
                       h.device < 0 ? -1 : h.device,
                       m->first,
                       m->second.size};
        return buffer_attribute(data, attribute, ptr, b) ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
    }
    auto it = containing(ptr);
    const bool known = it != st().allocations.end();
    if (!known && !zero_if_unknown)
        return CUDA_ERROR_INVALID_VALUE;
    const bool device = known && strcmp(it->second.kind, "device") == 0;
    Buffer b;
    if (known)
        b = {CU_MEMORYTYPE_DEVICE,
             it->second.context,
             it->second.buffer_id,
             it->second.device,
             it->first,
             it->second.size,
             strcmp(it->second.kind, "managed") == 0 ? 1u : 0u,
             device ? 1u : 0u};
    if (buffer_attribute(data, attribute, ptr, b))
        return CUDA_SUCCESS;
    switch (attribute) {
        case CU_POINTER_ATTRIBUTE_P2P_TOKENS: {
            if (!device)
                return CUDA_ERROR_INVALID_VALUE;
            auto* t = static_cast<CUDA_POINTER_ATTRIBUTE_P2P_TOKENS*>(data);
            t->p2pToken = it->first;
            t->vaSpaceToken = static_cast<unsigned int>(getpid());
            log_event("p2p tokens %zu", it->second.size);
            return CUDA_SUCCESS;
        }
        default:
            return CUDA_ERROR_INVALID_VALUE;
    }
}

FAKE_EXPORT CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute,
                                           CUdeviceptr ptr)
{
    REQUIRE_INIT();
    if (data == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(st().mutex);
    return pointer_attribute(data, attribute, ptr, false);
}

FAKE_EXPORT CUresult cuPointerGetAttributes(unsigned int count, CUpointer_attribute* attributes,
                                            void** data, CUdeviceptr ptr)
{
    REQUIRE_INIT();
    if (attributes == nullptr || data == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(st().mutex);
    for (unsigned int i = 0; i < count; ++i) {
        if (data[i] == nullptr)
            return CUDA_ERROR_INVALID_VALUE;
        const CUresult r = pointer_attribute(data[i], attributes[i], ptr, true);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemFree_v2(CUdeviceptr dptr)
{
    return release(dptr, "cuMemFree_v2");
}

FAKE_EXPORT CUresult cuMemGetInfo_v2(size_t* free, size_t* total)
{
    REQUIRE_INIT();
    Context* c = current();
    if (c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    std::lock_guard<std::mutex> g(st().mutex);
    *total = st().memory;
    const uint64_t used = device_used_by_all(c->device);
    *free = used < st().memory ? st().memory - used : 0;
    log_event("meminfo free=%zu", *free);
    return CUDA_SUCCESS;
}

static CUresult alloc_async(CUdeviceptr* dptr, size_t size, CUstream s, const char* api)
{
    REQUIRE_INIT();
    Stream* str = resolve(s);
    bool captured = false;
    if (str != nullptr) {
        std::lock_guard<std::mutex> lock(str->mutex);
        captured = str->capturing;
        if (captured && str->graph != nullptr)
            str->graph->alloc_bytes += size;  // an allocation node of the graph
    }
    return allocate(dptr, size, captured ? "graph" : "async", true, api);
}

FAKE_EXPORT CUresult cuMemAllocAsync(CUdeviceptr* d, size_t n, CUstream s)
{
    return alloc_async(d, n, s, "cuMemAllocAsync");
}
FAKE_EXPORT CUresult cuMemAllocAsync_ptsz(CUdeviceptr* d, size_t n, CUstream s)
{
    return alloc_async(d, n, s == nullptr ? CU_STREAM_PER_THREAD : s, "cuMemAllocAsync_ptsz");
}
FAKE_EXPORT CUresult cuMemFreeAsync(CUdeviceptr d, CUstream)
{
    return release(d, "cuMemFreeAsync");
}
FAKE_EXPORT CUresult cuMemFreeAsync_ptsz(CUdeviceptr d, CUstream)
{
    return release(d, "cuMemFreeAsync_ptsz");
}

// ---- virtual memory management ------------------------------------------------------
// Handles own memfds; reservations are PROT_NONE address space; cuMemMap puts
// a handle's memfd at an address of a reservation (MAP_SHARED, so every
// mapping of a handle sees the same bytes) and cuMemUnmap puts PROT_NONE
// back. Sizes and offsets are rounded to pages (the driver wants multiples of
// the granularity; the fake is lenient there).

constexpr size_t kGranularity = 2u << 20;  // what the driver reports on current GPUs

static size_t page_round(size_t n)
{
    const auto page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return (n + page - 1) / page * page;
}

static bool page_aligned(uint64_t n)
{
    return n % static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) == 0;
}

static bool host_location(CUmemLocationType type)
{
    return type == CU_MEM_LOCATION_TYPE_HOST || type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
           type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

// The VMM calls whose failures a program may ask for (fakecuda_fail_next).
static bool may_fail(const char* call)
{
    return call != nullptr && (strcmp(call, "cuMemCreate") == 0 || strcmp(call, "cuMemMap") == 0 ||
                               strcmp(call, "cuMemSetAccess") == 0);
}

// The error `call` was asked to fail with (once), or CUDA_SUCCESS.
static CUresult failure_asked(const char* call)
{
    std::lock_guard<std::mutex> g(st().mutex);
    const auto it = st().fail_next.find(call);
    if (it == st().fail_next.end())
        return CUDA_SUCCESS;
    const CUresult e = it->second;
    st().fail_next.erase(it);
    log_event("fail %s %d", call, static_cast<int>(e));
    return e;
}

// The next `call` (cuMemCreate, cuMemMap or cuMemSetAccess) of this process
// fails with `error` and does nothing (see the top of this file).
FAKE_EXPORT CUresult fakecuda_fail_next(const char* call, CUresult error);
FAKE_EXPORT CUresult fakecuda_fail_next(const char* call, CUresult error)
{
    if (!may_fail(call) || error == CUDA_SUCCESS)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(st().mutex);
    st().fail_next[call] = error;
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                 const CUmemAllocationProp* prop, unsigned long long)
{
    REQUIRE_INIT();
    if (const CUresult e = failure_asked("cuMemCreate"); e != CUDA_SUCCESS)
        return e;
    if (handle == nullptr || prop == nullptr || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    const bool device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
    if (!device && !host_location(prop->location.type))
        return CUDA_ERROR_INVALID_VALUE;
    if (!device && !host_vmm_supported())
        return CUDA_ERROR_NOT_SUPPORTED;
    const CUdevice dev = device ? prop->location.id : -1;
    if (device && (dev < 0 || dev >= st().device_count))
        return CUDA_ERROR_INVALID_DEVICE;
    std::lock_guard<std::mutex> g(st().mutex);
    // The handle's memory, wherever it gets mapped; sparse until written.
    const int fd = memfd_create(device ? "fakecuda-vmm" : "fakecuda-vmm-host", MFD_CLOEXEC);
    if (fd < 0)
        return CUDA_ERROR_OUT_OF_MEMORY;
    if (ftruncate(fd, static_cast<off_t>(page_round(size))) != 0) {
        close(fd);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    if (device && !take_device_memory(dev, size, true)) {
        close(fd);
        log_event("full vmm %zu cuMemCreate", size);
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    *handle = st().next_handle++;
    st().handles[*handle] = {size, dev, device ? "vmm" : "vmm-host", fd};
    st().handle_refs[*handle] = 1;
    log_event("alloc %s %zu cuMemCreate", device ? "vmm" : "vmm-host", size);
    return CUDA_SUCCESS;
}

// Drops one reference; the last one frees the memory. Callers hold st().mutex.
static CUresult handle_unref(CUmemGenericAllocationHandle handle, const char* api)
{
    auto it = st().handles.find(handle);
    if (it == st().handles.end())
        return CUDA_ERROR_INVALID_VALUE;
    if (--st().handle_refs[handle] > 0)
        return CUDA_SUCCESS;
    if (it->second.device >= 0)
        take_device_memory(it->second.device, it->second.size, false);
    log_event("free %s %zu %s", it->second.kind, it->second.size, api);
    close(it->second.fd);  // no mapping is left, so this frees the memory
    st().handles.erase(it);
    st().handle_refs.erase(handle);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemRelease(CUmemGenericAllocationHandle handle)
{
    REQUIRE_INIT();
    std::lock_guard<std::mutex> g(st().mutex);
    return handle_unref(handle, "cuMemRelease");
}

// Address space only: nothing may touch it until something is mapped there.
// `addr` is a hint the driver may ignore; the fake does. The start is aligned
// to `align` (the granularity if 0): over-reserve, then trim both ends.
FAKE_EXPORT CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t align, CUdeviceptr,
                                         unsigned long long)
{
    REQUIRE_INIT();
    if (ptr == nullptr || size == 0 || (align & (align - 1)) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    size = page_round(size);
    align = std::max(page_round(align == 0 ? kGranularity : align), page_round(1));
    const size_t span = size + align;
    void* p = mmap(nullptr, span, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    const auto base = reinterpret_cast<uintptr_t>(p);
    const uintptr_t start = (base + align - 1) / align * align;
    if (start > base)
        munmap(p, start - base);
    if (base + span > start + size)
        munmap(reinterpret_cast<void*>(start + size), base + span - (start + size));
    std::lock_guard<std::mutex> g(st().mutex);
    st().reservations[start] = {size};
    *ptr = start;
    return CUDA_SUCCESS;
}

// As the driver: the whole reservation, with nothing mapped in it any more.
FAKE_EXPORT CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size)
{
    REQUIRE_INIT();
    std::lock_guard<std::mutex> g(st().mutex);
    auto it = st().reservations.find(ptr);
    if (it == st().reservations.end() || it->second.size != page_round(size))
        return CUDA_ERROR_INVALID_VALUE;
    auto m = st().mappings.lower_bound(ptr);
    if (m != st().mappings.end() && m->first < ptr + it->second.size)
        return CUDA_ERROR_INVALID_VALUE;
    munmap(reinterpret_cast<void*>(ptr), it->second.size);
    st().reservations.erase(it);
    return CUDA_SUCCESS;
}

// [offset, offset + size) of the handle's memory at ptr, inside one
// reservation and over nothing mapped yet. Not accessible by the device
// until cuMemSetAccess (as on a GPU).
FAKE_EXPORT CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset,
                              CUmemGenericAllocationHandle handle, unsigned long long flags)
{
    REQUIRE_INIT();
    if (const CUresult e = failure_asked("cuMemMap"); e != CUDA_SUCCESS)
        return e;
    if (size == 0 || flags != 0 || !page_aligned(ptr) || !page_aligned(offset))
        return CUDA_ERROR_INVALID_VALUE;
    size = page_round(size);
    if (const uint64_t us = env_u64("FAKECUDA_MAP_US", 0); us != 0)
        usleep(static_cast<useconds_t>(us));
    std::lock_guard<std::mutex> g(st().mutex);
    auto h = st().handles.find(handle);
    if (h == st().handles.end() || offset > page_round(h->second.size) ||
        size > page_round(h->second.size) - offset)
        return CUDA_ERROR_INVALID_VALUE;
    auto r = containing_in(st().reservations, ptr);
    if (r == st().reservations.end() || size > r->first + r->second.size - ptr)
        return CUDA_ERROR_INVALID_VALUE;
    auto next = st().mappings.lower_bound(ptr);  // the first mapping at or after ptr
    if (containing_in(st().mappings, ptr) != st().mappings.end() ||
        (next != st().mappings.end() && next->first < ptr + size))
        return CUDA_ERROR_INVALID_VALUE;
    if (mmap(reinterpret_cast<void*>(ptr), size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_FIXED,
             h->second.fd, static_cast<off_t>(offset)) == MAP_FAILED)
        return CUDA_ERROR_OUT_OF_MEMORY;
    st().mappings[ptr] = {size, handle, offset, 0, st().next_buffer_id++};
    st().handle_refs[handle]++;
    // A chunk of a power-of-two size off a multiple of it cannot get the
    // driver's large pages: tests look for these.
    const bool off_its_size = (size & (size - 1)) == 0 && ptr % size != 0;
    log_event("map %zu %s%s", size, h->second.kind, off_its_size ? " unaligned" : "");
    return CUDA_SUCCESS;
}

// Page-locking host memory: recorded (a range registered twice or
// unregistered without registration is refused, as by the driver; as the
// driver, registering needs a live context current on the calling thread),
// logged; the memory itself is the caller's. The record lives in State, which is
// never destroyed: the library's thread may make host memory while the
// process exits (a function's static map, destroyed by exit(), crashed a
// test client after its last line).

// Microseconds a registration takes: the number in the file that
// FAKECUDA_REGISTER_DELAY names, read at each call (a test slows pinning
// down from a moment of its choosing); none while it does not exist.
static uint64_t register_delay_us()
{
    const char* path = getenv("FAKECUDA_REGISTER_DELAY");
    FILE* f = path != nullptr ? fopen(path, "re") : nullptr;
    if (f == nullptr)
        return 0;
    unsigned long long us = 0;
    if (fscanf(f, "%llu", &us) != 1)
        us = 0;
    fclose(f);
    return us;
}

FAKE_EXPORT CUresult cuMemHostRegister_v2(void* p, size_t size, unsigned int flags)
{
    REQUIRE_INIT();
    if (p == nullptr || size == 0 || (flags & ~0xfu) != 0)
        return CUDA_ERROR_INVALID_VALUE;
    if (Context* c = current(); c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    else if (!c->alive)
        return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    if (const uint64_t us = register_delay_us(); us != 0) {
        usleep(static_cast<useconds_t>(us));
        if (!current()->alive)  // destroyed under the call
            return CUDA_ERROR_CONTEXT_IS_DESTROYED;
    }
    std::lock_guard<std::mutex> g(st().mutex);
    const auto start = reinterpret_cast<uintptr_t>(p);
    auto& ranges = st().host_registrations;
    auto next = ranges.lower_bound(start);
    if ((next != ranges.end() && next->first < start + size) ||
        (next != ranges.begin() && std::prev(next)->first + std::prev(next)->second > start))
        return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
    ranges[start] = size;
    log_event("host-register %zu", size);
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemHostUnregister(void* p)
{
    REQUIRE_INIT();
    std::lock_guard<std::mutex> g(st().mutex);
    auto& ranges = st().host_registrations;
    auto it = ranges.find(reinterpret_cast<uintptr_t>(p));
    if (it == ranges.end())
        return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
    log_event("host-unregister %zu", it->second);
    ranges.erase(it);
    return CUDA_SUCCESS;
}

// Whole mappings only, as the driver; one call may take several adjacent
// ones. Their addresses go back to PROT_NONE: touching them faults.
FAKE_EXPORT CUresult cuMemUnmap(CUdeviceptr ptr, size_t size)
{
    REQUIRE_INIT();
    size = page_round(size);
    std::lock_guard<std::mutex> g(st().mutex);
    auto& mappings = st().mappings;
    CUdeviceptr end = ptr;  // how far the mappings from ptr on cover, gap-free
    for (auto it = mappings.find(ptr); it != mappings.end() && it->first == end && end < ptr + size;
         ++it)
        end += it->second.size;
    if (size == 0 || end != ptr + size)
        return CUDA_ERROR_INVALID_VALUE;
    for (auto it = mappings.find(ptr); it != mappings.end() && it->first < end;) {
        if (mmap(reinterpret_cast<void*>(it->first), it->second.size, PROT_NONE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0) == MAP_FAILED)
            return CUDA_ERROR_OUT_OF_MEMORY;
        log_event("unmap %zu", it->second.size);
        const CUmemGenericAllocationHandle h = it->second.handle;
        it = mappings.erase(it);
        handle_unref(h, "cuMemUnmap");
    }
    return CUDA_SUCCESS;
}

// The devices the descriptors name may touch [ptr, ptr + size) once it is
// mapped and this is called (PROT_NONE takes access away), as on a GPU.
FAKE_EXPORT CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                                    size_t count)
{
    REQUIRE_INIT();
    if (const CUresult e = failure_asked("cuMemSetAccess"); e != CUDA_SUCCESS)
        return e;
    if (desc == nullptr || count == 0 || size == 0)
        return CUDA_ERROR_INVALID_VALUE;
    uint64_t grant = 0, revoke = 0;
    for (size_t i = 0; i < count; ++i) {
        if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE)
            return CUDA_ERROR_INVALID_VALUE;
        if (desc[i].location.id < 0 || desc[i].location.id >= st().device_count)
            return CUDA_ERROR_INVALID_DEVICE;
        const uint64_t bit = 1ull << desc[i].location.id;
        if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_NONE)
            revoke |= bit;
        else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE ||
                 desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ)
            grant |= bit;
        else
            return CUDA_ERROR_INVALID_VALUE;
    }
    std::lock_guard<std::mutex> g(st().mutex);
    auto& mappings = st().mappings;
    const CUdeviceptr end = ptr + page_round(size);
    for (CUdeviceptr at = ptr; at < end;) {  // every byte mapped?
        auto m = containing_in(mappings, at);
        if (m == mappings.end())
            return CUDA_ERROR_INVALID_VALUE;
        at = m->first + m->second.size;
    }
    for (auto m = containing_in(mappings, ptr); m != mappings.end() && m->first < end; ++m)
        m->second.access = (m->second.access | grant) & ~revoke;
    log_event("access %zu devices=%#llx none=%#llx", size, static_cast<unsigned long long>(grant),
              static_cast<unsigned long long>(revoke));
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemGetAllocationGranularity(size_t* granularity,
                                                   const CUmemAllocationProp* prop,
                                                   CUmemAllocationGranularity_flags)
{
    REQUIRE_INIT();
    if (granularity == nullptr || prop == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    *granularity = kGranularity;  // minimum and recommended alike
    return CUDA_SUCCESS;
}

// The same handle value again, with one more reference.
FAKE_EXPORT CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr)
{
    REQUIRE_INIT();
    std::lock_guard<std::mutex> g(st().mutex);
    auto it = containing_in(st().mappings, reinterpret_cast<CUdeviceptr>(addr));
    if (handle == nullptr || it == st().mappings.end())
        return CUDA_ERROR_INVALID_VALUE;
    st().handle_refs[it->second.handle]++;
    *handle = it->second.handle;
    return CUDA_SUCCESS;
}

// CUDA arrays: opaque handles with device memory behind them.
static CUresult make_array(uint64_t* out, size_t bytes, const char* api)
{
    REQUIRE_INIT();
    Context* c = current();
    if (c == nullptr)
        return CUDA_ERROR_INVALID_CONTEXT;
    if (out == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> g(st().mutex);
    if (!take_device_memory(c->device, bytes, true))
        return CUDA_ERROR_OUT_OF_MEMORY;
    *out = st().next_handle++ << 4;
    st().arrays[*out] = {bytes, c->device, "array"};
    log_event("alloc array %zu %s", bytes, api);
    return CUDA_SUCCESS;
}

static CUresult drop_array(uint64_t h, const char* api)
{
    REQUIRE_INIT();
    std::lock_guard<std::mutex> g(st().mutex);
    auto it = st().arrays.find(h);
    if (it == st().arrays.end())
        return CUDA_ERROR_INVALID_HANDLE;
    take_device_memory(it->second.device, it->second.size, false);
    log_event("free array %zu %s", it->second.size, api);
    st().arrays.erase(it);
    return CUDA_SUCCESS;
}

static size_t element_bytes(CUarray_format f, unsigned channels)
{
    const size_t b = f == CU_AD_FORMAT_UNSIGNED_INT8 || f == CU_AD_FORMAT_SIGNED_INT8 ? 1
                     : f == CU_AD_FORMAT_UNSIGNED_INT16 || f == CU_AD_FORMAT_SIGNED_INT16 ||
                             f == CU_AD_FORMAT_HALF
                         ? 2
                         : 4;
    return b * (channels == 0 ? 1 : channels);
}

FAKE_EXPORT CUresult cuArrayCreate_v2(CUarray* h, const CUDA_ARRAY_DESCRIPTOR* d)
{
    if (d == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    const size_t bytes =
        element_bytes(d->Format, d->NumChannels) * d->Width * (d->Height ? d->Height : 1);
    return make_array(reinterpret_cast<uint64_t*>(h), bytes, "cuArrayCreate_v2");
}

FAKE_EXPORT CUresult cuArray3DCreate_v2(CUarray* h, const CUDA_ARRAY3D_DESCRIPTOR* d)
{
    if (d == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    const size_t bytes = element_bytes(d->Format, d->NumChannels) * d->Width *
                         (d->Height ? d->Height : 1) * (d->Depth ? d->Depth : 1);
    return make_array(reinterpret_cast<uint64_t*>(h), bytes, "cuArray3DCreate_v2");
}

FAKE_EXPORT CUresult cuMipmappedArrayCreate(CUmipmappedArray* h, const CUDA_ARRAY3D_DESCRIPTOR* d,
                                            unsigned int levels)
{
    if (d == nullptr || levels == 0)
        return CUDA_ERROR_INVALID_VALUE;
    size_t bytes = 0, w = d->Width, hh = d->Height, dd = d->Depth;
    for (unsigned l = 0; l < levels; ++l) {
        bytes += element_bytes(d->Format, d->NumChannels) * w * (hh ? hh : 1) * (dd ? dd : 1);
        w = w > 1 ? w / 2 : 1;
        hh = hh > 1 ? hh / 2 : hh;
        dd = dd > 1 ? dd / 2 : dd;
    }
    return make_array(reinterpret_cast<uint64_t*>(h), bytes, "cuMipmappedArrayCreate");
}

FAKE_EXPORT CUresult cuArrayDestroy(CUarray h)
{
    return drop_array(reinterpret_cast<uint64_t>(h), "cuArrayDestroy");
}

FAKE_EXPORT CUresult cuMipmappedArrayDestroy(CUmipmappedArray h)
{
    return drop_array(reinterpret_cast<uint64_t>(h), "cuMipmappedArrayDestroy");
}

// ---- code --------------------------------------------------------------------------------

// A kernel's attributes: as a driver that loads the kernel at its first use
// (lazy loading), each call takes FAKECUDA_LOAD_US (default 0) of the
// caller's time, outside the fake's lock; logged.
FAKE_EXPORT CUresult cuFuncGetAttribute(int* value, CUfunction_attribute attribute, CUfunction f)
{
    REQUIRE_INIT();
    if (value == nullptr || f == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    if (const uint64_t us = env_u64("FAKECUDA_LOAD_US", 0); us != 0)
        usleep(static_cast<useconds_t>(us));
    *value = attribute == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK ? 1024 : 0;
    log_event("func-attribute %d", static_cast<int>(attribute));
    return CUDA_SUCCESS;
}

// ---- GPU work --------------------------------------------------------------------------

FAKE_EXPORT CUresult cuLaunchKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned, unsigned,
                                    unsigned, unsigned, CUstream s, void** params, void**)
{
    if (f == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    return submit(s, kernel_op("cuLaunchKernel", f, params), false);
}

FAKE_EXPORT CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned, unsigned, unsigned, unsigned,
                                         unsigned, unsigned, unsigned, CUstream s, void** params,
                                         void**)
{
    if (f == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    return submit(s == nullptr ? CU_STREAM_PER_THREAD : s,
                  kernel_op("cuLaunchKernel_ptsz", f, params), false);
}

FAKE_EXPORT CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params,
                                      void**)
{
    if (f == nullptr || config == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    return submit(config->hStream, kernel_op("cuLaunchKernelEx", f, params), false);
}

FAKE_EXPORT CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f,
                                           void** params, void**)
{
    if (f == nullptr || config == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    return submit(config->hStream == nullptr ? CU_STREAM_PER_THREAD : config->hStream,
                  kernel_op("cuLaunchKernelEx_ptsz", f, params), false);
}

FAKE_EXPORT CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned, unsigned, unsigned, unsigned,
                                               unsigned, unsigned, unsigned, CUstream s,
                                               void** params)
{
    if (f == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    return submit(s, kernel_op("cuLaunchCooperativeKernel", f, params), false);
}

// Stream memory operations. A wait blocks its stream until another
// submission (possibly from a thread that has not made it yet) writes the
// word: what makes a drain's synchronisation depend on later work.
static CUresult wait_value(CUstream s, CUdeviceptr addr, cuuint32_t value, unsigned int flags,
                           const char* api)
{
    if (addr == 0 || (flags & 0xf) > CU_STREAM_WAIT_VALUE_EQ)
        return CUDA_ERROR_INVALID_VALUE;
    auto* word = reinterpret_cast<std::atomic<uint32_t>*>(addr);
    const bool equal = (flags & 0xf) == CU_STREAM_WAIT_VALUE_EQ;
    return submit(s,
                  {api,
                   0,
                   [=] {
                       for (;;) {
                           const uint32_t v = word->load();
                           if (equal ? v == value : static_cast<int32_t>(v - value) >= 0)
                               return;
                           usleep(200);
                       }
                   },
                   {{word, sizeof *word}}},
                  false);
}

static CUresult write_value(CUstream s, CUdeviceptr addr, cuuint32_t value, const char* api)
{
    if (addr == 0)
        return CUDA_ERROR_INVALID_VALUE;
    auto* word = reinterpret_cast<std::atomic<uint32_t>*>(addr);
    return submit(s, {api, 0, [=] { word->store(value); }, {{word, sizeof *word}}}, false);
}

FAKE_EXPORT CUresult cuStreamWaitValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value,
                                            unsigned int flags)
{
    return wait_value(s, addr, value, flags, "cuStreamWaitValue32_v2");
}
FAKE_EXPORT CUresult cuStreamWriteValue32_v2(CUstream s, CUdeviceptr addr, cuuint32_t value,
                                             unsigned int)
{
    return write_value(s, addr, value, "cuStreamWriteValue32_v2");
}

// Deprecated launches (the function's parameters set beforehand; here the
// kernel takes FAKECUDA_KERNEL_US).
FAKE_EXPORT CUresult cuLaunch(CUfunction f)
{
    if (f == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    return submit(nullptr, {"cuLaunch", kernel_us(nullptr), {}}, false);
}
FAKE_EXPORT CUresult cuLaunchGrid(CUfunction f, int, int)
{
    if (f == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    return submit(nullptr, {"cuLaunchGrid", kernel_us(nullptr), {}}, false);
}
FAKE_EXPORT CUresult cuLaunchGridAsync(CUfunction f, int, int, CUstream s)
{
    if (f == nullptr)
        return CUDA_ERROR_INVALID_HANDLE;
    return submit(s, {"cuLaunchGridAsync", kernel_us(nullptr), {}}, false);
}
FAKE_EXPORT CUresult cuLaunchCooperativeKernelMultiDevice(CUDA_LAUNCH_PARAMS* list, unsigned int n,
                                                          unsigned int)
{
    if (list == nullptr || n == 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (unsigned int i = 0; i < n; ++i) {
        const CUresult r = submit(
            list[i].hStream,
            {"cuLaunchCooperativeKernelMultiDevice", kernel_us(list[i].kernelParams), {}}, false);
        if (r != CUDA_SUCCESS)
            return r;
    }
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(nullptr, ptr(dst), ptr(src), n, "cuMemcpy", true);
}
FAKE_EXPORT CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(CU_STREAM_PER_THREAD, ptr(dst), ptr(src), n, "cuMemcpy_ptds", true);
}
FAKE_EXPORT CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return copy(s, ptr(dst), ptr(src), n, "cuMemcpyAsync", false);
}
FAKE_EXPORT CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s)
{
    return copy(s == nullptr ? CU_STREAM_PER_THREAD : s, ptr(dst), ptr(src), n,
                "cuMemcpyAsync_ptsz", false);
}
FAKE_EXPORT CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n)
{
    return copy(nullptr, ptr(dst), src, n, "cuMemcpyHtoD_v2", true);
}
FAKE_EXPORT CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dst, const void* src, size_t n)
{
    return copy(CU_STREAM_PER_THREAD, ptr(dst), src, n, "cuMemcpyHtoD_v2_ptds", true);
}
FAKE_EXPORT CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n)
{
    return copy(nullptr, dst, ptr(src), n, "cuMemcpyDtoH_v2", true);
}
FAKE_EXPORT CUresult cuMemcpyDtoH_v2_ptds(void* dst, CUdeviceptr src, size_t n)
{
    return copy(CU_STREAM_PER_THREAD, dst, ptr(src), n, "cuMemcpyDtoH_v2_ptds", true);
}
FAKE_EXPORT CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n)
{
    return copy(nullptr, ptr(dst), ptr(src), n, "cuMemcpyDtoD_v2", true);
}
FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s)
{
    return copy(s, ptr(dst), src, n, "cuMemcpyHtoDAsync_v2", false);
}
FAKE_EXPORT CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dst, const void* src, size_t n,
                                               CUstream s)
{
    return copy(s == nullptr ? CU_STREAM_PER_THREAD : s, ptr(dst), src, n,
                "cuMemcpyHtoDAsync_v2_ptsz", false);
}
FAKE_EXPORT CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s)
{
    return copy(s, dst, ptr(src), n, "cuMemcpyDtoHAsync_v2", false);
}
FAKE_EXPORT CUresult cuMemcpyPeer(CUdeviceptr dst, CUcontext, CUdeviceptr src, CUcontext, size_t n)
{
    return copy(nullptr, ptr(dst), ptr(src), n, "cuMemcpyPeer", true);
}

static CUresult copy2d(const CUDA_MEMCPY2D* c, CUstream s, const char* api, bool sync)
{
    if (c == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    auto address = [](CUmemorytype type, const void* host, CUdeviceptr dev) {
        return type == CU_MEMORYTYPE_HOST ? const_cast<void*>(host) : ptr(dev);
    };
    auto* src = static_cast<unsigned char*>(address(c->srcMemoryType, c->srcHost, c->srcDevice));
    auto* dst = static_cast<unsigned char*>(address(c->dstMemoryType, c->dstHost, c->dstDevice));
    const CUDA_MEMCPY2D d = *c;
    std::vector<Range> rows;
    for (size_t y = 0; y < d.Height; ++y) {
        rows.push_back({dst + (d.dstY + y) * d.dstPitch + d.dstXInBytes, d.WidthInBytes});
        rows.push_back({src + (d.srcY + y) * d.srcPitch + d.srcXInBytes, d.WidthInBytes});
    }
    return submit(s,
                  {api, copy_us(),
                   [=] {
                       for (size_t y = 0; y < d.Height; ++y)
                           move_bytes(dst + (d.dstY + y) * d.dstPitch + d.dstXInBytes,
                                      src + (d.srcY + y) * d.srcPitch + d.srcXInBytes,
                                      d.WidthInBytes);
                   },
                   std::move(rows)},
                  sync);
}

FAKE_EXPORT CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* c)
{
    return copy2d(c, nullptr, "cuMemcpy2DUnaligned_v2", true);
}
FAKE_EXPORT CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* c)
{
    return copy2d(c, CU_STREAM_PER_THREAD, "cuMemcpy2DUnaligned_v2_ptds", true);
}
FAKE_EXPORT CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* c, CUstream s)
{
    return copy2d(c, s, "cuMemcpy2DAsync_v2", false);
}

FAKE_EXPORT CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n)
{
    return set(nullptr, ptr(d), &v, 1, n, "cuMemsetD8_v2", true);
}
// Work that reaches the driver past libnvshare's gate, as a tool's
// trampoline or an entry point the library does not know would: a memset by
// a name no hook wraps. On memory with nothing mapped it faults as any work.
FAKE_EXPORT CUresult fakecuda_escape_memset(CUdeviceptr d, unsigned char v, size_t n);
FAKE_EXPORT CUresult fakecuda_escape_memset(CUdeviceptr d, unsigned char v, size_t n)
{
    return set(nullptr, ptr(d), &v, 1, n, "fakecuda_escape_memset", true);
}
FAKE_EXPORT CUresult cuMemsetD8_v2_ptds(CUdeviceptr d, unsigned char v, size_t n)
{
    return set(CU_STREAM_PER_THREAD, ptr(d), &v, 1, n, "cuMemsetD8_v2_ptds", true);
}
FAKE_EXPORT CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned int v, size_t n)
{
    return set(nullptr, ptr(d), &v, 4, n, "cuMemsetD32_v2", true);
}
FAKE_EXPORT CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    return set(s, ptr(d), &v, 1, n, "cuMemsetD8Async", false);
}
FAKE_EXPORT CUresult cuMemsetD8Async_ptsz(CUdeviceptr d, unsigned char v, size_t n, CUstream s)
{
    return set(s == nullptr ? CU_STREAM_PER_THREAD : s, ptr(d), &v, 1, n, "cuMemsetD8Async_ptsz",
               false);
}
FAKE_EXPORT CUresult cuMemsetD32Async(CUdeviceptr d, unsigned int v, size_t n, CUstream s)
{
    return set(s, ptr(d), &v, 4, n, "cuMemsetD32Async", false);
}

// Prefetch: v1 takes a device ordinal, v2 a CUmemLocation; both are copies.
FAKE_EXPORT CUresult cuMemPrefetchAsync(CUdeviceptr, size_t, CUdevice, CUstream s)
{
    return submit(s, {"cuMemPrefetchAsync", copy_us(), {}}, false);
}
FAKE_EXPORT CUresult cuMemPrefetchAsync_ptsz(CUdeviceptr, size_t, CUdevice, CUstream s)
{
    return submit(s == nullptr ? CU_STREAM_PER_THREAD : s,
                  {"cuMemPrefetchAsync_ptsz", copy_us(), {}}, false);
}
FAKE_EXPORT CUresult cuMemPrefetchAsync_v2(CUdeviceptr, size_t bytes, CUmemLocation location,
                                           unsigned int flags, CUstream s)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    // Where data goes is what tests of nvshare's migration policy check.
    log_event("prefetch to %s %zu",
              location.type == CU_MEM_LOCATION_TYPE_DEVICE ? "device" : "host", bytes);
    return submit(s, {"cuMemPrefetchAsync_v2", copy_us(), {}}, false);
}
FAKE_EXPORT CUresult cuMemPrefetchAsync_v2_ptsz(CUdeviceptr, size_t, CUmemLocation,
                                                unsigned int flags, CUstream s)
{
    if (flags != 0)
        return CUDA_ERROR_INVALID_VALUE;
    return submit(s == nullptr ? CU_STREAM_PER_THREAD : s,
                  {"cuMemPrefetchAsync_v2_ptsz", copy_us(), {}}, false);
}

// ---- errors --------------------------------------------------------------------------------

FAKE_EXPORT CUresult cuGetErrorName(CUresult error, const char** name)
{
    switch (error) {
        case CUDA_SUCCESS:
            *name = "CUDA_SUCCESS";
            break;
        case CUDA_ERROR_INVALID_VALUE:
            *name = "CUDA_ERROR_INVALID_VALUE";
            break;
        case CUDA_ERROR_OUT_OF_MEMORY:
            *name = "CUDA_ERROR_OUT_OF_MEMORY";
            break;
        case CUDA_ERROR_NOT_INITIALIZED:
            *name = "CUDA_ERROR_NOT_INITIALIZED";
            break;
        case CUDA_ERROR_INVALID_CONTEXT:
            *name = "CUDA_ERROR_INVALID_CONTEXT";
            break;
        case CUDA_ERROR_NOT_FOUND:
            *name = "CUDA_ERROR_NOT_FOUND";
            break;
        case CUDA_ERROR_NOT_SUPPORTED:
            *name = "CUDA_ERROR_NOT_SUPPORTED";
            break;
        case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
            *name = "CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED";
            break;
        case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
            *name = "CUDA_ERROR_STREAM_CAPTURE_INVALIDATED";
            break;
        default:
            *name = "CUDA_ERROR_UNKNOWN";
            return CUDA_ERROR_INVALID_VALUE;
    }
    return CUDA_SUCCESS;
}

FAKE_EXPORT CUresult cuGetErrorString(CUresult error, const char** text)
{
    return cuGetErrorName(error, text);
}

// ---- cuGetProcAddress ----------------------------------------------------------------------
// Rows: base name, the CUDA version that introduced this ABI, whether it is
// the per-thread-default-stream flavour, the exported function. The driver
// picks, among rows of the base name with the requested stream flavour (or
// the plain one where none exists), the newest ABI not newer than the
// caller's version.

#define ROW(base, version, ptds, fn)                           \
    {                                                          \
        base, version, ptds, #fn, reinterpret_cast<void*>(&fn) \
    }

FAKE_EXPORT CUresult cuGetProcAddress(const char*, void**, int, cuuint64_t);
FAKE_EXPORT CUresult cuGetProcAddress_v2(const char*, void**, int, cuuint64_t,
                                         CUdriverProcAddressQueryResult*);

namespace {

struct ProcRow {
    const char* base;
    int version;
    bool ptds;
    const char* name;
    void* fn;
};

const ProcRow kProcRows[] = {
    ROW("cuInit", 2000, false, cuInit),
    ROW("cuDriverGetVersion", 2020, false, cuDriverGetVersion),
    ROW("cuDeviceGet", 2000, false, cuDeviceGet),
    ROW("cuDeviceGetCount", 2000, false, cuDeviceGetCount),
    ROW("cuDeviceGetName", 2000, false, cuDeviceGetName),
    ROW("cuDeviceGetUuid", 9020, false, cuDeviceGetUuid),
    ROW("cuDeviceGetUuid", 11040, false, cuDeviceGetUuid_v2),
    ROW("cuDeviceTotalMem", 3020, false, cuDeviceTotalMem_v2),
    ROW("cuDeviceGetAttribute", 2000, false, cuDeviceGetAttribute),
    ROW("cuDevicePrimaryCtxRetain", 7000, false, cuDevicePrimaryCtxRetain),
    ROW("cuDevicePrimaryCtxRelease", 11000, false, cuDevicePrimaryCtxRelease_v2),
    ROW("cuCtxCreate", 3020, false, cuCtxCreate_v2),
    ROW("cuCtxCreate", 12050, false, cuCtxCreate_v4),
    ROW("cuCtxDestroy", 4000, false, cuCtxDestroy_v2),
    ROW("cuCtxGetCurrent", 4000, false, cuCtxGetCurrent),
    ROW("cuCtxSetCurrent", 4000, false, cuCtxSetCurrent),
    ROW("cuCtxPushCurrent", 4000, false, cuCtxPushCurrent_v2),
    ROW("cuCtxPopCurrent", 4000, false, cuCtxPopCurrent_v2),
    ROW("cuCtxGetDevice", 2000, false, cuCtxGetDevice),
    ROW("cuDeviceCanAccessPeer", 4000, false, cuDeviceCanAccessPeer),
    ROW("cuCtxEnablePeerAccess", 4000, false, cuCtxEnablePeerAccess),
    ROW("cuCtxDisablePeerAccess", 4000, false, cuCtxDisablePeerAccess),
    ROW("cuCtxSynchronize", 2000, false, cuCtxSynchronize),
    ROW("cuStreamCreate", 2000, false, cuStreamCreate),
    ROW("cuStreamDestroy", 4000, false, cuStreamDestroy_v2),
    ROW("cuStreamGetCtx", 9020, false, cuStreamGetCtx),
    ROW("cuEventCreate", 2000, false, cuEventCreate),
    ROW("cuEventRecord", 2000, false, cuEventRecord),
    ROW("cuEventQuery", 2000, false, cuEventQuery),
    ROW("cuEventSynchronize", 2000, false, cuEventSynchronize),
    ROW("cuStreamWaitEvent", 3020, false, cuStreamWaitEvent),
    ROW("cuStreamSynchronize", 2000, false, cuStreamSynchronize),
    ROW("cuStreamSynchronize", 7000, true, cuStreamSynchronize_ptsz),
    ROW("cuStreamQuery", 2000, false, cuStreamQuery),
    ROW("cuStreamQuery", 7000, true, cuStreamQuery_ptsz),
    ROW("cuStreamBeginCapture", 10000, false, cuStreamBeginCapture),
    ROW("cuStreamBeginCapture", 10000, true, cuStreamBeginCapture_ptsz),
    ROW("cuStreamBeginCapture", 10010, false, cuStreamBeginCapture_v2),
    ROW("cuStreamBeginCapture", 10010, true, cuStreamBeginCapture_v2_ptsz),
    ROW("cuStreamEndCapture", 10000, false, cuStreamEndCapture),
    ROW("cuStreamEndCapture", 10000, true, cuStreamEndCapture_ptsz),
    ROW("cuStreamIsCapturing", 10000, false, cuStreamIsCapturing),
    ROW("cuStreamIsCapturing", 10000, true, cuStreamIsCapturing_ptsz),
    ROW("cuThreadExchangeStreamCaptureMode", 10010, false, cuThreadExchangeStreamCaptureMode),
    ROW("cuGraphInstantiate", 11040, false, cuGraphInstantiateWithFlags),
    ROW("cuGraphLaunch", 10000, false, cuGraphLaunch),
    ROW("cuGraphLaunch", 10000, true, cuGraphLaunch_ptsz),
    ROW("cuGraphExecDestroy", 10000, false, cuGraphExecDestroy),
    ROW("cuGraphDestroy", 10000, false, cuGraphDestroy),
    ROW("cuGraphCreate", 10000, false, cuGraphCreate),
    ROW("cuGraphAddMemAllocNode", 11040, false, cuGraphAddMemAllocNode),
    ROW("cuGraphAddMemsetNode", 10000, false, cuGraphAddMemsetNode),
    ROW("cuCtxGetLimit", 3010, false, cuCtxGetLimit),
    ROW("cuDeviceGetGraphMemAttribute", 11040, false, cuDeviceGetGraphMemAttribute),
    ROW("cuDeviceGraphMemTrim", 11040, false, cuDeviceGraphMemTrim),
    ROW("cuMemAlloc", 2000, false, cuMemAlloc),
    ROW("cuMemAlloc", 3020, false, cuMemAlloc_v2),
    ROW("cuMemAllocPitch", 3020, false, cuMemAllocPitch_v2),
    ROW("cuMemAllocManaged", 6000, false, cuMemAllocManaged),
    ROW("cuMemFree", 3020, false, cuMemFree_v2),
    ROW("cuMemGetInfo", 3020, false, cuMemGetInfo_v2),
    ROW("cuMemAllocAsync", 11020, false, cuMemAllocAsync),
    ROW("cuMemAllocAsync", 11020, true, cuMemAllocAsync_ptsz),
    ROW("cuMemFreeAsync", 11020, false, cuMemFreeAsync),
    ROW("cuMemFreeAsync", 11020, true, cuMemFreeAsync_ptsz),
    ROW("cuMemCreate", 10020, false, cuMemCreate),
    ROW("cuMemRelease", 10020, false, cuMemRelease),
    ROW("cuMemAddressReserve", 10020, false, cuMemAddressReserve),
    ROW("cuMemAddressFree", 10020, false, cuMemAddressFree),
    ROW("cuMemMap", 10020, false, cuMemMap),
    ROW("cuMemUnmap", 10020, false, cuMemUnmap),
    ROW("cuMemSetAccess", 10020, false, cuMemSetAccess),
    ROW("cuMemHostRegister", 6050, false, cuMemHostRegister_v2),
    ROW("cuMemHostUnregister", 4000, false, cuMemHostUnregister),
    ROW("cuMemGetAllocationGranularity", 10020, false, cuMemGetAllocationGranularity),
    ROW("cuMemRetainAllocationHandle", 11000, false, cuMemRetainAllocationHandle),
    ROW("cuArrayCreate", 3020, false, cuArrayCreate_v2),
    ROW("cuArray3DCreate", 3020, false, cuArray3DCreate_v2),
    ROW("cuArrayDestroy", 2000, false, cuArrayDestroy),
    ROW("cuMipmappedArrayCreate", 5000, false, cuMipmappedArrayCreate),
    ROW("cuMipmappedArrayDestroy", 5000, false, cuMipmappedArrayDestroy),
    ROW("cuIpcGetMemHandle", 4010, false, cuIpcGetMemHandle),
    ROW("cuMemGetHandleForAddressRange", 11070, false, cuMemGetHandleForAddressRange),
    ROW("cuPointerGetAttribute", 4000, false, cuPointerGetAttribute),
    ROW("cuPointerGetAttributes", 7000, false, cuPointerGetAttributes),
    ROW("cuFuncGetAttribute", 2020, false, cuFuncGetAttribute),
    ROW("cuLaunchKernel", 4000, false, cuLaunchKernel),
    ROW("cuLaunchKernel", 7000, true, cuLaunchKernel_ptsz),
    ROW("cuLaunchKernelEx", 11060, false, cuLaunchKernelEx),
    ROW("cuLaunchKernelEx", 11060, true, cuLaunchKernelEx_ptsz),
    ROW("cuLaunchCooperativeKernel", 9000, false, cuLaunchCooperativeKernel),
    ROW("cuStreamWaitValue32", 11070, false, cuStreamWaitValue32_v2),
    ROW("cuStreamWriteValue32", 11070, false, cuStreamWriteValue32_v2),
    ROW("cuLaunch", 2000, false, cuLaunch),
    ROW("cuLaunchGrid", 2000, false, cuLaunchGrid),
    ROW("cuLaunchGridAsync", 2000, false, cuLaunchGridAsync),
    ROW("cuLaunchCooperativeKernelMultiDevice", 9000, false, cuLaunchCooperativeKernelMultiDevice),
    ROW("cuMemcpy", 4000, false, cuMemcpy),
    ROW("cuMemcpy", 7000, true, cuMemcpy_ptds),
    ROW("cuMemcpyAsync", 4000, false, cuMemcpyAsync),
    ROW("cuMemcpyAsync", 7000, true, cuMemcpyAsync_ptsz),
    ROW("cuMemcpyHtoD", 3020, false, cuMemcpyHtoD_v2),
    ROW("cuMemcpyHtoD", 7000, true, cuMemcpyHtoD_v2_ptds),
    ROW("cuMemcpyDtoH", 3020, false, cuMemcpyDtoH_v2),
    ROW("cuMemcpyDtoH", 7000, true, cuMemcpyDtoH_v2_ptds),
    ROW("cuMemcpyDtoD", 3020, false, cuMemcpyDtoD_v2),
    ROW("cuMemcpyHtoDAsync", 3020, false, cuMemcpyHtoDAsync_v2),
    ROW("cuMemcpyHtoDAsync", 7000, true, cuMemcpyHtoDAsync_v2_ptsz),
    ROW("cuMemcpyDtoHAsync", 3020, false, cuMemcpyDtoHAsync_v2),
    ROW("cuMemcpyPeer", 4000, false, cuMemcpyPeer),
    ROW("cuMemcpy2DUnaligned", 3020, false, cuMemcpy2DUnaligned_v2),
    ROW("cuMemcpy2DUnaligned", 7000, true, cuMemcpy2DUnaligned_v2_ptds),
    ROW("cuMemcpy2DAsync", 3020, false, cuMemcpy2DAsync_v2),
    ROW("cuMemsetD8", 3020, false, cuMemsetD8_v2),
    ROW("cuMemsetD8", 7000, true, cuMemsetD8_v2_ptds),
    ROW("cuMemsetD32", 3020, false, cuMemsetD32_v2),
    ROW("cuMemsetD8Async", 3020, false, cuMemsetD8Async),
    ROW("cuMemsetD8Async", 7000, true, cuMemsetD8Async_ptsz),
    ROW("cuMemsetD32Async", 3020, false, cuMemsetD32Async),
    ROW("cuMemPrefetchAsync", 8000, false, cuMemPrefetchAsync),
    ROW("cuMemPrefetchAsync", 8000, true, cuMemPrefetchAsync_ptsz),
    ROW("cuMemPrefetchAsync", 12020, false, cuMemPrefetchAsync_v2),
    ROW("cuMemPrefetchAsync", 12020, true, cuMemPrefetchAsync_v2_ptsz),
    ROW("cuGetErrorName", 6000, false, cuGetErrorName),
    ROW("cuGetErrorString", 6000, false, cuGetErrorString),
    ROW("cuGetProcAddress", 11030, false, cuGetProcAddress),
    ROW("cuGetProcAddress", 12000, false, cuGetProcAddress_v2),
};

CUresult proc_address(const char* symbol, void** pfn, int version, cuuint64_t flags,
                      CUdriverProcAddressQueryResult* status)
{
    if (symbol == nullptr || pfn == nullptr)
        return CUDA_ERROR_INVALID_VALUE;
    *pfn = nullptr;
    const bool want_ptds = (flags & CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM) != 0;
    const ProcRow* best = nullptr;
    bool known = false;
    for (int pass = want_ptds ? 0 : 1; pass < 2 && best == nullptr; ++pass) {
        const bool ptds = pass == 0;
        for (const ProcRow& r : kProcRows) {
            if (strcmp(r.base, symbol) != 0)
                continue;
            known = true;
            if (r.ptds != ptds || r.version > version)
                continue;
            if (best == nullptr || r.version > best->version)
                best = &r;
        }
    }
    if (best == nullptr) {
        if (status != nullptr)
            *status = known ? CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT
                            : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        return CUDA_ERROR_NOT_FOUND;
    }
    *pfn = best->fn;
    if (status != nullptr)
        *status = CU_GET_PROC_ADDRESS_SUCCESS;
    return CUDA_SUCCESS;
}

}  // namespace

FAKE_EXPORT CUresult cuGetProcAddress(const char* symbol, void** pfn, int version, cuuint64_t flags)
{
    return proc_address(symbol, pfn, version, flags, nullptr);
}

FAKE_EXPORT CUresult cuGetProcAddress_v2(const char* symbol, void** pfn, int version,
                                         cuuint64_t flags, CUdriverProcAddressQueryResult* status)
{
    return proc_address(symbol, pfn, version, flags, status);
}
