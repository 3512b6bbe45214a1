// The parts of libtorch's distributed engine (c10d) that csam uses: a TCP
// rendezvous store, a Gloo process group over it, and its all-reduce,
// broadcast and barrier. Used by crates/csam-dist/src/process_group.rs.
//
// Every function that can fail returns NULL on success or a message the
// caller frees with csam_dist_free_error; no C++ exception crosses into Rust.

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include "shim_errors.h"

#include <chrono>
#include <cstring>
#include <string>
#include <vector>

// A process group with the store it rendezvoused through (the store must
// outlive the group).
struct csam_process_group {
  c10::intrusive_ptr<c10d::Store> store;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
};

// A collective in flight.
struct csam_work {
  c10::intrusive_ptr<c10d::Work> work;
};

extern "C" {

typedef torch::Tensor *dist_tensor;

void csam_dist_free_error(char *message) { free(message); }

// Joins the group of `world_size` processes that rendezvous at
// `host:port` (rank 0 serves the store there) as `rank`; every collective
// and the rendezvous itself fail after `timeout_ms`. Gloo's TCP transport
// binds to the interface that resolves `host`'s route, as
// torch.distributed does with the env:// method.
char *csam_dist_connect(const char *host, int port, int rank, int world_size,
                        long long timeout_ms, csam_process_group **out) {
  return protect([&] {
    auto timeout = std::chrono::milliseconds(timeout_ms);
    c10d::TCPStoreOptions store_options;
    store_options.port = static_cast<uint16_t>(port);
    store_options.isServer = rank == 0;
    store_options.numWorkers = world_size;
    store_options.waitWorkers = true;
    store_options.timeout = timeout;
    auto store = c10::make_intrusive<c10d::TCPStore>(std::string(host), store_options);
    auto options = c10d::ProcessGroupGloo::Options::create(timeout);
    options->devices.push_back(c10d::ProcessGroupGloo::createDeviceForHostname(host));
    auto group = c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, world_size, options);
    *out = new csam_process_group{store, group};
  });
}

void csam_dist_free(csam_process_group *group) { delete group; }

// Starts summing `tensor` over the group in place.
char *csam_dist_all_reduce_sum(csam_process_group *group, dist_tensor tensor, csam_work **out) {
  return protect([&] {
    std::vector<at::Tensor> tensors{*tensor};
    c10d::AllreduceOptions options;
    options.reduceOp = c10d::ReduceOp::SUM;
    *out = new csam_work{group->group->allreduce(tensors, options)};
  });
}

// Starts copying `tensor` of rank `root` into every rank's `tensor`.
char *csam_dist_broadcast(csam_process_group *group, dist_tensor tensor, int root,
                          csam_work **out) {
  return protect([&] {
    std::vector<at::Tensor> tensors{*tensor};
    c10d::BroadcastOptions options;
    options.rootRank = root;
    *out = new csam_work{group->group->broadcast(tensors, options)};
  });
}

// Waits for a collective to finish (or fail, or time out), then frees it.
char *csam_dist_wait(csam_work *work) {
  char *error = protect([&] { work->work->wait(); });
  delete work;
  return error;
}

// Returns once every rank has called it.
char *csam_dist_barrier(csam_process_group *group) {
  return protect([&] { group->group->barrier()->wait(); });
}
}
