// Gradient buckets summed over a process group while the backward pass
// still runs, as PyTorch's DistributedDataParallel does with its Reducer:
// a hook on every parameter copies its gradient into the parameter's bucket
// as autograd produces it, and a bucket whose every gradient has arrived
// starts its Gloo all-reduce at once, while autograd goes on with the layers
// below. Used by crates/csam-dist/src/gradient_buckets.rs.
//
// The hooks are tensor pre-hooks of the parameters: autograd runs them for
// `torch.autograd.grad`-style backward passes too (tch's run_backward,
// which csam's steps use), where DDP's post-hooks on the gradient
// accumulators would never fire. They act only between `arm` and `finish`,
// so passes that must stay local (SAM's first pass, a Hessian-vector
// product) are left alone.
//
// Every rank must launch the same collectives in the same order: buckets are
// launched in their index order only (a bucket complete before an earlier
// one waits for it), as DDP does, and the bucket layout is the same on every
// rank (the same parameters and caps).

#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <ATen/ATen.h>

#include "shim_errors.h"

#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct csam_process_group;
c10::intrusive_ptr<c10d::ProcessGroupGloo> csam_dist_group_of(csam_process_group *group);
c10::intrusive_ptr<c10d::Work> csam_dist_start_sum(
    const c10::intrusive_ptr<c10d::ProcessGroupGloo> &group, const at::Tensor &tensor);

namespace {

struct Bucket {
  // The parameters in this bucket, in the order of their slices.
  std::vector<size_t> members;
  // This round's `rows * gradient` of every member, flat, followed in the
  // last bucket by `rows` itself (so the sum carries the global row count).
  at::Tensor flat;
  // Members whose gradient has not arrived this round.
  size_t waiting = 0;
  c10::intrusive_ptr<c10d::Work> work;
};

// Where a parameter's gradient lives: its bucket and its slice there.
struct Slot {
  size_t bucket;
  int64_t offset;
  int64_t numel;
};

struct BucketState {
  std::mutex mutex;
  c10::intrusive_ptr<c10d::ProcessGroupGloo> group;
  std::vector<at::Tensor> params;
  std::vector<Slot> slots;
  std::vector<Bucket> buckets;
  at::ScalarType dtype;
  // Between arm and finish.
  bool armed = false;
  double rows = 0;
  std::vector<bool> arrived;
  // Buckets launched so far this round (launches go in index order).
  size_t launched = 0;
  // Of those, the ones launched before finish: by the hooks during the
  // backward pass (the overlap), or as gradients were added by hand.
  size_t launched_early = 0;
  // The first failure of this round; the hooks stop acting after it.
  std::string error;

  void launch_ready() {
    while (launched < buckets.size() && buckets[launched].waiting == 0) {
      Bucket &bucket = buckets[launched];
      at::NoGradGuard no_grad;
      bucket.flat.mul_(rows);
      bucket.work = csam_dist_start_sum(group, bucket.flat);
      launched++;
    }
  }

  // The hook of parameter `index`, with the gradient autograd computed.
  void arrive(size_t index, const at::Tensor &grad) {
    std::lock_guard<std::mutex> lock(mutex);
    if (!armed || !error.empty() || arrived[index]) {
      return;
    }
    keep_first_error(protect([&] {
      const Slot &slot = slots[index];
      at::NoGradGuard no_grad;
      buckets[slot.bucket].flat.narrow(0, slot.offset, slot.numel).copy_(grad.reshape({-1}));
      arrived[index] = true;
      buckets[slot.bucket].waiting--;
      size_t before = launched;
      launch_ready();
      launched_early += launched - before;
    }));
  }

  // Records `message` (from `protect`, freed here) unless an earlier
  // failure of the round is recorded already.
  void keep_first_error(char *message) {
    if (message == nullptr) return;
    if (error.empty()) error = message;
    free(message);
  }
};

// Waits for every launched collective of the round, even after a failure,
// so that no bucket is freed while Gloo still writes it.
void wait_all(BucketState &state) {
  for (size_t b = 0; b < state.launched; b++) {
    if (!state.buckets[b].work) continue;
    state.keep_first_error(protect([&] { state.buckets[b].work->wait(); }));
    state.buckets[b].work.reset();
  }
}

} // namespace

// The buckets of a list of parameters, with a hook on each parameter.
struct csam_gradient_buckets {
  std::shared_ptr<BucketState> state;
  std::vector<unsigned> hooks;
};

extern "C" {

typedef at::Tensor *dist_tensor;

// Buckets over `params` (`n_params` CPU tensors of floating types): bucket b
// holds the parameters `order[bucket_ends[b-1] .. bucket_ends[b]]` (from 0
// for b = 0), every parameter in exactly one bucket. Registers a hook on
// every parameter, removed by csam_dist_buckets_free.
char *csam_dist_buckets_new(csam_process_group *group, dist_tensor *params, size_t n_params,
                            const size_t *order, const size_t *bucket_ends, size_t n_buckets,
                            csam_gradient_buckets **out) {
  return protect([&] {
    auto state = std::make_shared<BucketState>();
    state->group = csam_dist_group_of(group);
    TORCH_CHECK(n_params > 0 && n_buckets > 0 && bucket_ends[n_buckets - 1] == n_params,
                "the buckets must hold every parameter");
    state->slots.assign(n_params, Slot{0, 0, 0});
    std::vector<bool> placed(n_params, false);
    state->dtype = params[order[0]]->scalar_type();
    size_t start = 0;
    for (size_t b = 0; b < n_buckets; b++) {
      TORCH_CHECK(bucket_ends[b] > start, "a bucket must not be empty");
      Bucket bucket;
      int64_t offset = 0;
      for (size_t k = start; k < bucket_ends[b]; k++) {
        size_t index = order[k];
        TORCH_CHECK(index < n_params && !placed[index], "each parameter belongs in one bucket");
        const at::Tensor &param = *params[index];
        TORCH_CHECK(param.device().is_cpu(), "Gloo reduces CPU tensors; a parameter is on ",
                    param.device());
        state->dtype = c10::promoteTypes(state->dtype, param.scalar_type());
        placed[index] = true;
        state->slots[index] = Slot{b, offset, param.numel()};
        bucket.members.push_back(index);
        offset += param.numel();
      }
      state->buckets.push_back(std::move(bucket));
      start = bucket_ends[b];
    }
    for (size_t i = 0; i < n_params; i++) {
      state->params.push_back(*params[i]);
    }
    auto buckets = new csam_gradient_buckets{state, {}};
    for (size_t i = 0; i < n_params; i++) {
      std::weak_ptr<BucketState> weak = state;
      buckets->hooks.push_back(state->params[i].register_hook([weak, i](const at::Tensor &grad) {
        if (auto alive = weak.lock()) alive->arrive(i, grad);
      }));
    }
    *out = buckets;
  });
}

// Starts a round: the next backward pass's gradients of the parameters,
// each multiplied by `rows`, are summed over the group as they arrive.
char *csam_dist_buckets_arm(csam_gradient_buckets *buckets, double rows) {
  return protect([&] {
    BucketState &state = *buckets->state;
    std::lock_guard<std::mutex> lock(state.mutex);
    TORCH_CHECK(!state.armed, "a round of gradient buckets is already under way");
    auto options = at::TensorOptions().dtype(state.dtype);
    for (size_t b = 0; b < state.buckets.size(); b++) {
      Bucket &bucket = state.buckets[b];
      int64_t size = 0;
      for (size_t index : bucket.members) size += state.slots[index].numel;
      bool last = b + 1 == state.buckets.size();
      bucket.flat = at::empty({size + (last ? 1 : 0)}, options);
      if (last) bucket.flat.narrow(0, size, 1).fill_(1.0);
      bucket.waiting = bucket.members.size();
    }
    state.rows = rows;
    state.arrived.assign(state.params.size(), false);
    state.launched = 0;
    state.launched_early = 0;
    state.error.clear();
    state.armed = true;
  });
}

// Hands parameter `index`'s gradient to the round by hand (a gradient
// computed before it was armed), as its hook would.
char *csam_dist_buckets_add(csam_gradient_buckets *buckets, size_t index, dist_tensor grad) {
  return protect([&] {
    BucketState &state = *buckets->state;
    TORCH_CHECK(index < state.params.size(), "no parameter ", index, " in the buckets");
    TORCH_CHECK(grad->sizes() == state.params[index].sizes(), "a gradient of shape ",
                grad->sizes(), " for a parameter of shape ", state.params[index].sizes());
    state.arrive(index, *grad);
    std::lock_guard<std::mutex> lock(state.mutex);
    TORCH_CHECK(state.error.empty(), state.error);
  });
}

// Ends the round: the parameters the backward pass did not reach count with
// a zero gradient; the remaining buckets are launched, every collective is
// waited for, and `out[i]` is set to parameter i's mean gradient over the
// group's rows (the sum of `rows * gradient` over the ranks divided by the
// sum of `rows`), a new tensor of the parameter's shape and type.
// `*launched_early` is the number of buckets launched before this call.
char *csam_dist_buckets_finish(csam_gradient_buckets *buckets, dist_tensor *out,
                               size_t *launched_early) {
  BucketState &state = *buckets->state;
  std::lock_guard<std::mutex> lock(state.mutex);
  if (!state.armed) return copy_message("no round of gradient buckets is under way");
  state.armed = false;
  char *error = protect([&] {
    if (!state.error.empty()) return;
    at::NoGradGuard no_grad;
    for (size_t i = 0; i < state.params.size(); i++) {
      if (state.arrived[i]) continue;
      const Slot &slot = state.slots[i];
      state.buckets[slot.bucket].flat.narrow(0, slot.offset, slot.numel).zero_();
      state.buckets[slot.bucket].waiting--;
    }
    state.launch_ready();
  });
  wait_all(state);
  if (error == nullptr && !state.error.empty()) error = copy_message(state.error);
  if (error != nullptr) return error;
  return protect([&] {
    at::NoGradGuard no_grad;
    const at::Tensor &last = state.buckets.back().flat;
    double total_rows = last[last.numel() - 1].item<double>();
    std::vector<at::Tensor> means;
    for (size_t i = 0; i < state.params.size(); i++) {
      const Slot &slot = state.slots[i];
      const at::Tensor &param = state.params[i];
      at::Tensor sum = state.buckets[slot.bucket].flat.narrow(0, slot.offset, slot.numel);
      means.push_back((sum / total_rows).view(param.sizes()).to(param.scalar_type()));
    }
    for (size_t i = 0; i < means.size(); i++) out[i] = new at::Tensor(std::move(means[i]));
    for (Bucket &bucket : state.buckets) bucket.flat = at::Tensor();
    *launched_early = state.launched_early;
  });
}

// Removes the hooks and frees the buckets, waiting for a round's
// collectives still in flight.
void csam_dist_buckets_free(csam_gradient_buckets *buckets) {
  {
    std::lock_guard<std::mutex> lock(buckets->state->mutex);
    buckets->state->armed = false;
    wait_all(*buckets->state);
  }
  for (size_t i = 0; i < buckets->hooks.size(); i++) {
    buckets->state->params[i].remove_hook(buckets->hooks[i]);
  }
  delete buckets;
}
}
