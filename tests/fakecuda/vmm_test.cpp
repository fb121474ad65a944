// The fake driver's VMM model (fakecuda.cpp), checked on its own: data
// follows its handle from one address to another (the moves of the preload
// library's swap engine), work on an address where nothing is mapped faults
// without touching it and loses the context, also where the memory went
// after the work was queued, kernels touch the memory they are given, access
// is per device, and the attributes and granularity the library reads.
// Linked with the fake libcuda.so.1; runs with FAKECUDA_MEMORY=64 MiB and
// FAKECUDA_DEVICES=2 (meson.build).
#include <cuda.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

extern "C" CUresult fakecuda_fail_next(const char* call, CUresult error);

namespace {

constexpr size_t kMiB = 1u << 20;
constexpr size_t kChunk = 2 * kMiB;

CUmemAllocationProp prop_at(CUmemLocationType type)
{
    CUmemAllocationProp p{};
    p.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    p.location.type = type;
    p.location.id = 0;
    return p;
}

CUmemGenericAllocationHandle create(CUmemLocationType type, size_t size)
{
    const CUmemAllocationProp prop = prop_at(type);
    CUmemGenericAllocationHandle h = 0;
    EXPECT_EQ(cuMemCreate(&h, size, &prop, 0), CUDA_SUCCESS);
    return h;
}

void map(CUdeviceptr va, size_t size, CUmemGenericAllocationHandle h)
{
    ASSERT_EQ(cuMemMap(va, size, 0, h, 0), CUDA_SUCCESS);
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = 0;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    ASSERT_EQ(cuMemSetAccess(va, size, &access, 1), CUDA_SUCCESS);
}

std::vector<unsigned char> pattern(size_t size, unsigned seed)
{
    std::vector<unsigned char> v(size);
    for (size_t i = 0; i < size; ++i)
        v[i] = static_cast<unsigned char>((i * 31 + seed) >> 3);
    return v;
}

// The fake's kernel function that reads and writes a byte of every page of
// [ptr, ptr + bytes) when it runs; function 1 touches nothing.
const CUfunction kTouch = reinterpret_cast<CUfunction>(2);
const CUfunction kIdle = reinterpret_cast<CUfunction>(1);

CUresult launch(CUfunction f, CUstream s, CUdeviceptr ptr, uint64_t bytes, uint32_t us = 10)
{
    void* params[] = {&us, &ptr, &bytes};
    return cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr);
}

std::string fault_line(const char* call, CUdeviceptr at)
{
    std::ostringstream line;
    line << " fault " << call << " 0x" << std::hex << at << "\n";
    return line.str();
}

std::string read_log(const std::string& path)
{
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

// Each test runs in a context of its own (the fault test loses its one).
class Vmm : public ::testing::Test {
protected:
    void SetUp() override
    {
        log_ = ::testing::TempDir() + "fakecuda-vmm-" + std::to_string(getpid()) + ".log";
        unlink(log_.c_str());
        setenv("FAKECUDA_LOG", log_.c_str(), 1);
        ASSERT_EQ(cuInit(0), CUDA_SUCCESS);
        ASSERT_EQ(cuCtxCreate_v4(&ctx_, nullptr, 0, 0), CUDA_SUCCESS);
        ASSERT_EQ(cuStreamCreate(&stream_, 0), CUDA_SUCCESS);
    }
    void TearDown() override
    {
        cuStreamDestroy_v2(stream_);  // gives its device memory back
        cuCtxDestroy_v2(ctx_);
        unsetenv("FAKECUDA_LOG");
        unsetenv("FAKECUDA_NO_HOST_VMM");
        unlink(log_.c_str());
    }

    std::string log_;
    CUcontext ctx_ = nullptr;
    CUstream stream_ = nullptr;
};

TEST_F(Vmm, GranularityAndAttributes)
{
    const CUmemAllocationProp prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE);
    size_t g = 0;
    EXPECT_EQ(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM),
              CUDA_SUCCESS);
    EXPECT_EQ(g, kChunk);
    g = 0;
    EXPECT_EQ(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED),
              CUDA_SUCCESS);
    EXPECT_EQ(g, kChunk);

    int v = -1;
    EXPECT_EQ(cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
              CUDA_SUCCESS);
    EXPECT_EQ(v, 1);
    EXPECT_EQ(
        cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
        CUDA_SUCCESS);
    EXPECT_EQ(v, 1);

    // Without host VMM: the attribute says so and host handles are refused.
    setenv("FAKECUDA_NO_HOST_VMM", "1", 1);
    EXPECT_EQ(
        cuDeviceGetAttribute(&v, CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 0),
        CUDA_SUCCESS);
    EXPECT_EQ(v, 0);
    const CUmemAllocationProp host = prop_at(CU_MEM_LOCATION_TYPE_HOST);
    CUmemGenericAllocationHandle h = 0;
    EXPECT_EQ(cuMemCreate(&h, kChunk, &host, 0), CUDA_ERROR_NOT_SUPPORTED);
    unsetenv("FAKECUDA_NO_HOST_VMM");
    ASSERT_EQ(cuMemCreate(&h, kChunk, &host, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
}

// Device handles count against FAKECUDA_MEMORY (64 MiB here), host ones not.
TEST_F(Vmm, OnlyDeviceHandlesTakeDeviceMemory)
{
    const CUmemAllocationProp device = prop_at(CU_MEM_LOCATION_TYPE_DEVICE);
    const CUmemAllocationProp host = prop_at(CU_MEM_LOCATION_TYPE_HOST);
    CUmemGenericAllocationHandle d = 0, too_much = 0, h = 0;
    ASSERT_EQ(cuMemCreate(&d, 48 * kMiB, &device, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemCreate(&too_much, 32 * kMiB, &device, 0), CUDA_ERROR_OUT_OF_MEMORY);
    ASSERT_EQ(cuMemCreate(&h, 128 * kMiB, &host, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(d), CUDA_SUCCESS);
    ASSERT_EQ(cuMemCreate(&too_much, 32 * kMiB, &device, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(too_much), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
}

// The swap engine's moves on a two-chunk allocation: out to host handles
// through a staging reservation and back in to new device handles. The data
// survives both.
TEST_F(Vmm, DataFollowsItsHandle)
{
    const size_t size = 2 * kChunk;
    CUdeviceptr user = 0, staging = 0;
    ASSERT_EQ(cuMemAddressReserve(&user, size, 0, 0, 0), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAddressReserve(&staging, size, 0, 0, 0), CUDA_SUCCESS);
    EXPECT_EQ(user % kChunk, 0u);
    CUmemGenericAllocationHandle dev[2], host[2];
    for (int i = 0; i < 2; ++i) {
        dev[i] = create(CU_MEM_LOCATION_TYPE_DEVICE, kChunk);
        map(user + i * kChunk, kChunk, dev[i]);
    }
    const std::vector<unsigned char> data = pattern(size, 7);
    ASSERT_EQ(cuMemcpyHtoD_v2(user, data.data(), size), CUDA_SUCCESS);

    // Swap out.
    for (int i = 0; i < 2; ++i) {
        host[i] = create(CU_MEM_LOCATION_TYPE_HOST, kChunk);
        map(staging + i * kChunk, kChunk, host[i]);
    }
    ASSERT_EQ(cuMemcpyAsync(staging, user, size, stream_), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
    ASSERT_EQ(cuMemUnmap(user, size), CUDA_SUCCESS);  // both chunks in one call
    for (int i = 0; i < 2; ++i) {
        map(user + i * kChunk, kChunk, host[i]);
        EXPECT_EQ(cuMemRelease(dev[i]), CUDA_SUCCESS);
    }
    std::vector<unsigned char> back(size);
    ASSERT_EQ(cuMemcpyDtoH_v2(back.data(), user, size), CUDA_SUCCESS);
    EXPECT_EQ(back, data);
    // The user's address and the staging one are the same host memory now.
    const unsigned char marker = 0x5a;
    ASSERT_EQ(cuMemsetD8_v2(staging + 5, marker, 1), CUDA_SUCCESS);
    unsigned char seen = 0;
    ASSERT_EQ(cuMemcpyDtoH_v2(&seen, user + 5, 1), CUDA_SUCCESS);
    EXPECT_EQ(seen, marker);
    ASSERT_EQ(cuMemcpyHtoD_v2(user + 5, &data[5], 1), CUDA_SUCCESS);

    // Swap in.
    for (int i = 0; i < 2; ++i) {
        dev[i] = create(CU_MEM_LOCATION_TYPE_DEVICE, kChunk);
        ASSERT_EQ(cuMemUnmap(user + i * kChunk, kChunk), CUDA_SUCCESS);
        map(user + i * kChunk, kChunk, dev[i]);
        EXPECT_EQ(cuMemRelease(dev[i]), CUDA_SUCCESS);  // the mapping keeps it
    }
    ASSERT_EQ(cuMemcpyAsync(user, staging, size, stream_), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
    back.assign(size, 0);
    ASSERT_EQ(cuMemcpyDtoH_v2(back.data(), user, size), CUDA_SUCCESS);
    EXPECT_EQ(back, data);

    ASSERT_EQ(cuMemUnmap(staging, size), CUDA_SUCCESS);
    for (int i = 0; i < 2; ++i)
        EXPECT_EQ(cuMemRelease(host[i]), CUDA_SUCCESS);
    ASSERT_EQ(cuMemUnmap(user, size), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(user, size), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(staging, size), CUDA_SUCCESS);

    const std::string log = read_log(log_);
    EXPECT_NE(log.find(" map 2097152 vmm-host"), std::string::npos) << log;
    EXPECT_NE(log.find(" map 2097152 vmm\n"), std::string::npos) << log;
    EXPECT_NE(log.find(" unmap 2097152"), std::string::npos) << log;
    EXPECT_NE(log.find(" access 2097152"), std::string::npos) << log;
    EXPECT_EQ(log.find(" fault "), std::string::npos) << log;
}

TEST_F(Vmm, MisuseIsRefused)
{
    CUdeviceptr va = 0;
    ASSERT_EQ(cuMemAddressReserve(&va, 2 * kChunk, 0, 0, 0), CUDA_SUCCESS);
    const CUmemGenericAllocationHandle h = create(CU_MEM_LOCATION_TYPE_DEVICE, 2 * kChunk);
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    EXPECT_EQ(cuMemSetAccess(va, kChunk, &access, 1), CUDA_ERROR_INVALID_VALUE);      // unmapped
    EXPECT_EQ(cuMemMap(va + kChunk, 2 * kChunk, 0, h, 0), CUDA_ERROR_INVALID_VALUE);  // past end
    int outside = 0;
    EXPECT_EQ(cuMemMap(reinterpret_cast<CUdeviceptr>(&outside), kChunk, 0, h, 0),
              CUDA_ERROR_INVALID_VALUE);
    ASSERT_EQ(cuMemMap(va, kChunk, 0, h, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemMap(va, kChunk, kChunk, h, 0), CUDA_ERROR_INVALID_VALUE);  // overlaps
    ASSERT_EQ(cuMemMap(va + kChunk, kChunk, kChunk, h, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemSetAccess(va, 2 * kChunk, &access, 1), CUDA_SUCCESS);
    EXPECT_EQ(cuMemUnmap(va, kChunk / 2), CUDA_ERROR_INVALID_VALUE);  // part of a mapping
    EXPECT_EQ(cuMemUnmap(va + kChunk / 2, kChunk), CUDA_ERROR_INVALID_VALUE);
    EXPECT_EQ(cuMemAddressFree(va, 2 * kChunk), CUDA_ERROR_INVALID_VALUE);  // still mapped

    // A mapped address answers as device memory of that mapping; a reserved,
    // unmapped one is unknown.
    CUmemorytype type{};
    CUdeviceptr start = 0;
    size_t range = 0;
    unsigned int managed = 1;
    EXPECT_EQ(cuPointerGetAttribute(&type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + kChunk + 8),
              CUDA_SUCCESS);
    EXPECT_EQ(type, CU_MEMORYTYPE_DEVICE);
    EXPECT_EQ(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + kChunk + 8),
              CUDA_SUCCESS);
    EXPECT_EQ(start, va + kChunk);
    EXPECT_EQ(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + 8), CUDA_SUCCESS);
    EXPECT_EQ(range, kChunk);
    EXPECT_EQ(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, va), CUDA_SUCCESS);
    EXPECT_EQ(managed, 0u);
    ASSERT_EQ(cuMemUnmap(va + kChunk, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + kChunk),
              CUDA_ERROR_INVALID_VALUE);

    ASSERT_EQ(cuMemUnmap(va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(va, kChunk), CUDA_ERROR_INVALID_VALUE);  // not the whole range
    EXPECT_EQ(cuMemAddressFree(va, 2 * kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_ERROR_INVALID_VALUE);  // its memory is gone
}

// Work on an address where nothing is mapped does not run (no segfault
// here), is logged as a fault, and loses the context for good.
TEST_F(Vmm, UnmappedAccessFaultsAndLosesTheContext)
{
    CUdeviceptr va = 0;
    ASSERT_EQ(cuMemAddressReserve(&va, 2 * kChunk, 0, 0, 0), CUDA_SUCCESS);
    const CUmemGenericAllocationHandle h = create(CU_MEM_LOCATION_TYPE_DEVICE, kChunk);
    map(va, kChunk, h);
    ASSERT_EQ(cuMemsetD8Async(va, 1, kChunk, stream_), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
    EXPECT_TRUE(read_log(log_).find(" fault ") == std::string::npos);

    // Straddles the mapped chunk and the unmapped one after it.
    EXPECT_EQ(cuMemcpyAsync(va + kChunk / 2, va, kChunk, stream_), CUDA_ERROR_ILLEGAL_ADDRESS);
    std::ostringstream expected;
    expected << " fault cuMemcpyAsync 0x" << std::hex << va + kChunk << "\n";
    EXPECT_NE(read_log(log_).find(expected.str()), std::string::npos) << read_log(log_);
    EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_EQ(cuStreamQuery(stream_), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_EQ(cuCtxSynchronize(), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_EQ(cuMemsetD8Async(va, 2, 16, stream_), CUDA_ERROR_ILLEGAL_ADDRESS);  // legal, but lost
    unsigned char first = 0;
    memcpy(&first, reinterpret_cast<void*>(va), 1);
    EXPECT_EQ(first, 1);  // neither the faulting copy nor later work ran

    ASSERT_EQ(cuMemUnmap(va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(va, 2 * kChunk), CUDA_SUCCESS);
}

// Mapped but without cuMemSetAccess: the device may not touch it yet.
TEST_F(Vmm, MappedWithoutAccessFaults)
{
    CUdeviceptr va = 0;
    ASSERT_EQ(cuMemAddressReserve(&va, kChunk, 0, 0, 0), CUDA_SUCCESS);
    const CUmemGenericAllocationHandle h = create(CU_MEM_LOCATION_TYPE_HOST, kChunk);
    ASSERT_EQ(cuMemMap(va, kChunk, 0, h, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuMemsetD8_v2(va, 1, 4), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_NE(read_log(log_).find(" fault cuMemsetD8_v2 "), std::string::npos);
    ASSERT_EQ(cuMemUnmap(va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(va, kChunk), CUDA_SUCCESS);
}

// Addresses are checked when the work runs, not only when it is queued: a
// memset and a touching kernel queued (legally) behind a wait for a flag,
// whose memory is unmapped before the flag is written (cuMemUnmap does not
// wait for queued work, as on a GPU), fault when they run and write
// nothing: the swap engine's moves under queued work show as faults.
TEST_F(Vmm, WorkIsCheckedWhenItRunsNotOnlyWhenItIsQueued)
{
    CUdeviceptr flag = 0, va = 0;
    ASSERT_EQ(cuMemAlloc_v2(&flag, 4096), CUDA_SUCCESS);
    ASSERT_EQ(cuMemsetD8_v2(flag, 0, 4096), CUDA_SUCCESS);
    ASSERT_EQ(cuMemAddressReserve(&va, kChunk, 0, 0, 0), CUDA_SUCCESS);
    const CUmemGenericAllocationHandle h = create(CU_MEM_LOCATION_TYPE_DEVICE, kChunk);
    map(va, kChunk, h);
    CUstream writer = nullptr;
    ASSERT_EQ(cuStreamCreate(&writer, 0), CUDA_SUCCESS);

    ASSERT_EQ(cuStreamWaitValue32_v2(stream_, flag, 1, CU_STREAM_WAIT_VALUE_GEQ), CUDA_SUCCESS);
    ASSERT_EQ(cuMemsetD8Async(va, 1, kChunk, stream_), CUDA_SUCCESS);  // mapped: queued
    ASSERT_EQ(launch(kTouch, stream_, va, kChunk), CUDA_SUCCESS);
    ASSERT_EQ(cuMemUnmap(va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(read_log(log_).find(" fault "), std::string::npos) << read_log(log_);
    ASSERT_EQ(cuStreamWriteValue32_v2(writer, flag, 1, 0), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_NE(read_log(log_).find(fault_line("cuMemsetD8Async", va)), std::string::npos)
        << read_log(log_);

    // The handle's memory, mapped again, was never written.
    ASSERT_EQ(cuMemMap(va, kChunk, 0, h, 0), CUDA_SUCCESS);
    const auto* bytes = reinterpret_cast<const unsigned char*>(va);
    EXPECT_EQ(bytes[0], 0);
    EXPECT_EQ(bytes[kChunk - 1], 0);
    ASSERT_EQ(cuMemUnmap(va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(va, kChunk), CUDA_SUCCESS);
    // The fake frees after the fault; a GPU answers the context's sticky
    // error instead, and so does libnvshare.so in front of the fake (on a
    // host where it is preloaded, the flag is swappable memory).
    const CUresult freed = cuMemFree_v2(flag);
    EXPECT_TRUE(freed == CUDA_SUCCESS || freed == CUDA_ERROR_ILLEGAL_ADDRESS) << freed;
    EXPECT_EQ(cuStreamDestroy_v2(writer), CUDA_SUCCESS);
}

// Kernels touch the memory they are given: the touching function reaches
// every page of its range as its stream's device, so a range that runs past
// the mapped chunk into unmapped address space faults (at its first
// unmapped byte) and loses the context, while a kernel given no memory
// (function 1, the same arguments) touches nothing and does not fault.
// Within mapped memory the touch keeps the data.
TEST_F(Vmm, KernelsTouchTheMemoryTheyAreGiven)
{
    CUdeviceptr va = 0;
    ASSERT_EQ(cuMemAddressReserve(&va, 2 * kChunk, 0, 0, 0), CUDA_SUCCESS);
    const CUmemGenericAllocationHandle h = create(CU_MEM_LOCATION_TYPE_DEVICE, kChunk);
    map(va, kChunk, h);
    const std::vector<unsigned char> data = pattern(kChunk, 3);
    ASSERT_EQ(cuMemcpyHtoD_v2(va, data.data(), kChunk), CUDA_SUCCESS);

    ASSERT_EQ(launch(kTouch, stream_, va, kChunk), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
    std::vector<unsigned char> back(kChunk);
    ASSERT_EQ(cuMemcpyDtoH_v2(back.data(), va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(back, data);

    ASSERT_EQ(launch(kIdle, stream_, va, 2 * kChunk), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);
    EXPECT_EQ(read_log(log_).find(" fault "), std::string::npos) << read_log(log_);

    EXPECT_EQ(launch(kTouch, stream_, va, 2 * kChunk), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_NE(read_log(log_).find(fault_line("cuLaunchKernel", va + kChunk)), std::string::npos)
        << read_log(log_);
    EXPECT_EQ(cuStreamSynchronize(stream_), CUDA_ERROR_ILLEGAL_ADDRESS);

    ASSERT_EQ(cuMemUnmap(va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(va, 2 * kChunk), CUDA_SUCCESS);
}

// Access is per device, as on a GPU (two fake devices): memory mapped with
// access for device 0 only is an illegal address for a kernel on device 1,
// and reachable from device 1 once cuMemSetAccess grants it too. A process
// on two GPUs (peer kernels, DataParallel) needs its memory's access
// granted to each device that reaches it; this is what lets tests see it.
TEST_F(Vmm, AccessIsPerDevice)
{
    CUdeviceptr va = 0;
    ASSERT_EQ(cuMemAddressReserve(&va, kChunk, 0, 0, 0), CUDA_SUCCESS);
    const CUmemGenericAllocationHandle h = create(CU_MEM_LOCATION_TYPE_DEVICE, kChunk);
    map(va, kChunk, h);  // access for device 0
    ASSERT_EQ(launch(kTouch, stream_, va, kChunk), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamSynchronize(stream_), CUDA_SUCCESS);

    // A context on device 1 (current until destroyed): its kernel faults.
    CUcontext one = nullptr;
    CUstream on_one = nullptr;
    ASSERT_EQ(cuCtxCreate_v4(&one, nullptr, 0, 1), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&on_one, 0), CUDA_SUCCESS);
    EXPECT_EQ(launch(kTouch, on_one, va, kChunk), CUDA_ERROR_ILLEGAL_ADDRESS);
    EXPECT_NE(read_log(log_).find(fault_line("cuLaunchKernel", va)), std::string::npos)
        << read_log(log_);
    EXPECT_EQ(cuStreamDestroy_v2(on_one), CUDA_SUCCESS);
    EXPECT_EQ(cuCtxDestroy_v2(one), CUDA_SUCCESS);

    // Granted to device 1 as well: a fresh context there reaches it.
    CUmemAccessDesc both[2] = {};
    for (int d = 0; d < 2; ++d) {
        both[d].location.type = CU_MEM_LOCATION_TYPE_DEVICE;
        both[d].location.id = d;
        both[d].flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    }
    ASSERT_EQ(cuMemSetAccess(va, kChunk, both, 2), CUDA_SUCCESS);
    ASSERT_EQ(cuCtxCreate_v4(&one, nullptr, 0, 1), CUDA_SUCCESS);
    ASSERT_EQ(cuStreamCreate(&on_one, 0), CUDA_SUCCESS);
    EXPECT_EQ(launch(kTouch, on_one, va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamSynchronize(on_one), CUDA_SUCCESS);
    EXPECT_EQ(cuStreamDestroy_v2(on_one), CUDA_SUCCESS);
    EXPECT_EQ(cuCtxDestroy_v2(one), CUDA_SUCCESS);
    const std::string log = read_log(log_);
    EXPECT_EQ(log.find(" fault "), log.rfind(" fault ")) << "more than one fault:\n" << log;

    ASSERT_EQ(cuMemUnmap(va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(va, kChunk), CUDA_SUCCESS);
}

// A failure asked for (fakecuda_fail_next, what the e2e tests use to see
// driver errors other than a full device) comes once, at the next call of
// that name, which then does nothing; only the VMM calls it names may fail.
TEST_F(Vmm, AFailureAskedForComesOnceAndDoesNothing)
{
    EXPECT_EQ(fakecuda_fail_next("cuMemAlloc_v2", CUDA_ERROR_UNKNOWN), CUDA_ERROR_INVALID_VALUE);
    CUdeviceptr va = 0;
    ASSERT_EQ(cuMemAddressReserve(&va, kChunk, 0, 0, 0), CUDA_SUCCESS);
    CUmemGenericAllocationHandle h = 0;
    const CUmemAllocationProp prop = prop_at(CU_MEM_LOCATION_TYPE_DEVICE);
    ASSERT_EQ(fakecuda_fail_next("cuMemCreate", CUDA_ERROR_UNKNOWN), CUDA_SUCCESS);
    EXPECT_EQ(cuMemCreate(&h, kChunk, &prop, 0), CUDA_ERROR_UNKNOWN);
    EXPECT_EQ(h, 0u);
    h = create(CU_MEM_LOCATION_TYPE_DEVICE, kChunk);

    ASSERT_EQ(fakecuda_fail_next("cuMemMap", CUDA_ERROR_INVALID_DEVICE), CUDA_SUCCESS);
    EXPECT_EQ(cuMemMap(va, kChunk, 0, h, 0), CUDA_ERROR_INVALID_DEVICE);
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    EXPECT_EQ(cuMemSetAccess(va, kChunk, &access, 1), CUDA_ERROR_INVALID_VALUE);  // not mapped
    ASSERT_EQ(cuMemMap(va, kChunk, 0, h, 0), CUDA_SUCCESS);

    ASSERT_EQ(fakecuda_fail_next("cuMemSetAccess", CUDA_ERROR_UNKNOWN), CUDA_SUCCESS);
    EXPECT_EQ(cuMemSetAccess(va, kChunk, &access, 1), CUDA_ERROR_UNKNOWN);
    EXPECT_EQ(cuMemsetD8_v2(va, 1, 4), CUDA_ERROR_ILLEGAL_ADDRESS);  // no access was granted
    EXPECT_NE(read_log(log_).find(" fail cuMemSetAccess 999\n"), std::string::npos)
        << read_log(log_);

    ASSERT_EQ(cuMemUnmap(va, kChunk), CUDA_SUCCESS);
    EXPECT_EQ(cuMemRelease(h), CUDA_SUCCESS);
    EXPECT_EQ(cuMemAddressFree(va, kChunk), CUDA_SUCCESS);
}

}  // namespace
