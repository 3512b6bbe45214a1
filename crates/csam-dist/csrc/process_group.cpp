// The parts of libtorch's distributed engine (c10d) that csam uses: a TCP
// rendezvous store, a Gloo process group over it, and its all-reduce,
// broadcast and barrier, and one differentiable collective (a sum
// all-reduce that autograd differentiates, for SyncBatchNorm). Used by
// crates/csam-dist/src/process_group.rs.
//
// Every function that can fail returns NULL on success or a message the
// caller frees with csam_dist_free_error; no C++ exception crosses into Rust.

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <torch/csrc/autograd/custom_function.h>

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

// The Gloo group behind a handle, for the other shim files
// (gradient_buckets.cpp).
c10::intrusive_ptr<c10d::ProcessGroupGloo> csam_dist_group_of(csam_process_group *group) {
  return group->group;
}

// Starts summing `tensor` (dense, contiguous) over `group` in place: every
// sum all-reduce of the shims (also gradient_buckets.cpp's).
c10::intrusive_ptr<c10d::Work> csam_dist_start_sum(
    const c10::intrusive_ptr<c10d::ProcessGroupGloo> &group, const at::Tensor &tensor) {
  std::vector<at::Tensor> tensors{tensor};
  c10d::AllreduceOptions options;
  options.reduceOp = c10d::ReduceOp::SUM;
  return group->allreduce(tensors, options);
}

namespace {

// Sums `tensor` over `group` into a new tensor and waits for it.
at::Tensor summed(const c10::intrusive_ptr<c10d::ProcessGroupGloo> &group, const at::Tensor &tensor) {
  at::Tensor sum = tensor.clone(at::MemoryFormat::Contiguous);
  csam_dist_start_sum(group, sum)->wait();
  return sum;
}

// y = sum over the ranks of x, as a function autograd differentiates. Its
// adjoint is again a sum all-reduce: rank r's x reaches every rank's y, so
// dL/dx_r = sum over ranks r' of dL/dy_r' (torch.distributed.nn's
// all_reduce, and what SyncBatchNorm's backward computes). Every rank runs
// the backward in the same order, as the forward (the same graph).
struct DifferentiableSum : public torch::autograd::Function<DifferentiableSum> {
  static at::Tensor forward(torch::autograd::AutogradContext *ctx, const at::Tensor &x,
                            c10::intrusive_ptr<c10d::ProcessGroupGloo> group) {
    // The group rides in the graph, so a backward run after the Rust
    // handle is gone still finds it alive.
    ctx->saved_data["group"] = c10::IValue::make_capsule(group);
    return summed(group, x);
  }

  static torch::autograd::variable_list backward(torch::autograd::AutogradContext *ctx,
                                                 torch::autograd::variable_list grads) {
    auto group = c10::static_intrusive_pointer_cast<c10d::ProcessGroupGloo>(
        ctx->saved_data["group"].toCapsule());
    return {summed(group, grads[0]), at::Tensor()};
  }
};

} // namespace

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
    *out = new csam_work{csam_dist_start_sum(group->group, *tensor)};
  });
}

// `*out` = the sum of `tensor` over the group, a new tensor whose gradient
// is summed over the group again in the backward pass (DifferentiableSum).
char *csam_dist_differentiable_sum(csam_process_group *group, dist_tensor tensor,
                                   dist_tensor *out) {
  return protect([&] {
    *out = new torch::Tensor(DifferentiableSum::apply(*tensor, group->group));
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
