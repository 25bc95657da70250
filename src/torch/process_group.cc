// The PyTorch c10d backend "atp" (python/atp_torch registers it): a thin adapter from torch's
// ProcessGroup to a ClusterJob. allreduce (SUM, AVG) of float32 CPU tensors goes through ATP;
// broadcast, allgather and barrier go through torch's own store (exact, for control data); any
// other collective or dtype raises "not supported by atp: ...". Options come from ATP_* variables.
#include <pybind11/chrono.h>
#include <torch/python.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <torch/csrc/distributed/c10d/Types.hpp>
#include <torch/csrc/distributed/c10d/Work.hpp>
#include <vector>

#include "atp/cluster/cluster_job.h"
#include "atp/collectives/store.h"

namespace atp::torch_backend {
namespace {

constexpr const char* kSupported =
    "atp offers allreduce (SUM, AVG) of float32 CPU tensors, broadcast, allgather and barrier";

[[noreturn]] void unsupported(const std::string& what) {
  TORCH_CHECK(false, "not supported by atp: ", what, " (", kSupported, ")");
}

// torch's store (the PrefixStore of this process group) as ATP's rendezvous Store; our keys
// under "atp/".
class TorchStore : public Store {
 public:
  explicit TorchStore(c10::intrusive_ptr<c10d::Store> store) : store_(std::move(store)) {}

  void set(const std::string& key, const std::string& value) override {
    store_->set("atp/" + key, std::vector<std::uint8_t>(value.begin(), value.end()));
  }
  std::string get(const std::string& key, Duration timeout) override {
    try {
      // c10d reads a wait of 0 ms as "no timeout" (the store's own, as long as init_process_group's):
      // a deadline that has passed, or is under a millisecond away, waits 1 ms instead.
      store_->wait({"atp/" + key},
                   std::max(std::chrono::ceil<std::chrono::milliseconds>(timeout), std::chrono::milliseconds(1)));
      const std::vector<std::uint8_t> value = store_->get("atp/" + key);
      return std::string(value.begin(), value.end());
    } catch (const std::exception& e) {  // a timeout, or the store's server (rank 0) is gone
      throw CollectiveError("the rendezvous store has no key " + key + " (" + first_line(e.what()) + ")");
    }
  }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_->add("atp/" + key, delta); }
  void erase(const std::string& key) override { store_->deleteKey("atp/" + key); }

 private:
  static std::string first_line(const std::string& text) { return text.substr(0, text.find('\n')); }
  c10::intrusive_ptr<c10d::Store> store_;
};

// An environment variable, or "" when unset.
std::string env(const char* name) {
  const char* value = std::getenv(name);
  return value ? value : "";
}

SocketAddress env_endpoint(const char* name, const std::string& value) {
  try {
    return SocketAddress::parse(value);
  } catch (const std::invalid_argument&) {
    TORCH_CHECK(false, "atp: ", name, "='", value, "' is not HOST:PORT like 127.0.0.1:9100");
  }
}

double env_number(const char* name, double min, double max) {
  const std::string value = env(name);
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  TORCH_CHECK(!value.empty() && end == value.c_str() + value.size() && v >= min && v <= max, "atp: ", name, "='", value,
              "' must be a number from ", min, " to ", max);
  return v;
}

// ClusterJobOptions from ATP_LOCAL, ATP_SWITCH, ATP_PS, ATP_SWITCHES, ATP_BIND,
// ATP_VALUES_PER_PACKET, ATP_SCALE, ATP_RTO_MS; the timeout is init_process_group's.
ClusterJobOptions options_from_environment(Duration timeout) {
  ClusterJobOptions o;
  o.timeout = timeout;
  const std::string local = env("ATP_LOCAL");
  TORCH_CHECK(local.empty() || local == "0" || local == "1", "atp: ATP_LOCAL='", local, "' must be 1 or 0");
  o.local = local == "1";
  const std::string switch_control = env("ATP_SWITCH"), ps_control = env("ATP_PS");
  if (!o.local) {
    TORCH_CHECK(!switch_control.empty() && !ps_control.empty(),
                "atp: set ATP_SWITCH and ATP_PS to the control addresses (HOST:PORT) of a running `atp switch` and "
                "`atp ps`, or ATP_LOCAL=1 to have rank 0 start a switch and a PS itself");
    o.switch_control = env_endpoint("ATP_SWITCH", switch_control);
    o.ps_control = env_endpoint("ATP_PS", ps_control);
    // HOST:PORT,HOST:PORT,...: the switches between the ranks' racks and the PS's (a core).
    const std::string more = env("ATP_SWITCHES");
    for (std::size_t at = 0; !more.empty() && at <= more.size();) {
      const std::size_t comma = std::min(more.find(',', at), more.size());
      o.switches.push_back(env_endpoint("ATP_SWITCHES", more.substr(at, comma - at)));
      at = comma + 1;
    }
  } else {
    TORCH_CHECK(env("ATP_SWITCHES").empty(), "atp: ATP_SWITCHES names running switches; ATP_LOCAL=1 starts its own");
  }
  if (const std::string bind = env("ATP_BIND"); !bind.empty()) o.bind_ip = env_endpoint("ATP_BIND", bind + ":0").ip;
  if (!env("ATP_VALUES_PER_PACKET").empty()) {
    o.values_per_packet = static_cast<std::uint16_t>(env_number("ATP_VALUES_PER_PACKET", 1, kMaxValuesPerPacket));
  }
  if (!env("ATP_SCALE").empty()) o.scale = env_number("ATP_SCALE", 1, 1e9);
  if (!env("ATP_RTO_MS").empty()) {
    o.retransmit_timeout =
        std::chrono::microseconds(static_cast<std::int64_t>(env_number("ATP_RTO_MS", 0.01, 10000) * 1000));
  }
  return o;
}

// A collective queued on the group's thread. c10d::Work keeps the completion state (wait,
// isCompleted, isSuccess); the future is what DDP's communication hook chains on.
class AtpWork : public c10d::Work {
 public:
  AtpWork(c10d::OpType type, std::vector<at::Tensor> outputs)
      : Work(-1, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(c10::ListType::create(c10::TensorType::get()))) {}

  void complete(std::exception_ptr error) {
    finish(error);
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
  }
  std::vector<at::Tensor> result() override { return outputs_; }
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

// A tensor's bytes, and writing bytes back into it (through a contiguous copy when needed).
std::string bytes_of(const at::Tensor& t) {
  const at::Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), c.nbytes());
}
void assign_bytes(at::Tensor& t, const std::string& bytes, const char* what, int from) {
  TORCH_CHECK(bytes.size() == t.nbytes(), "atp ", what, ": rank ", from, " sent ", bytes.size(),
              " bytes for a tensor of ", t.nbytes(), " bytes here; every rank must pass tensors of the same size");
  if (t.is_contiguous()) {
    std::memcpy(t.data_ptr(), bytes.data(), bytes.size());
  } else {
    at::Tensor c = at::empty_like(t, at::MemoryFormat::Contiguous);
    std::memcpy(c.data_ptr(), bytes.data(), bytes.size());
    t.copy_(c);
  }
}

void check_cpu(const std::vector<at::Tensor>& tensors, const char* what) {
  TORCH_CHECK(tensors.size() == 1, "atp ", what, ": expected one tensor per call, got ", tensors.size());
  if (!tensors[0].device().is_cpu()) unsupported(std::string(what) + " of tensors on " + tensors[0].device().str());
}

class ProcessGroupAtp : public c10d::ProcessGroup {
 public:
  ProcessGroupAtp(const c10::intrusive_ptr<c10d::Store>& store, int rank, int size, Duration timeout)
      : ProcessGroup(rank, size), store_(store) {
    const ClusterJobOptions options = options_from_environment(timeout);
    try {
      job_ = ClusterJob::join(store_, rank, size, options);
    } catch (const std::exception& e) {
      TORCH_CHECK(false, "atp: ", e.what());
    }
    small_ = std::make_unique<StoreCollectives>(store_, "collective", rank, size, timeout);
    thread_ = std::thread([this] { run(); });
  }

  ~ProcessGroupAtp() override {
    // Python drops the group holding the GIL, and the group's thread may need the GIL to free a
    // tensor that has a Python object: let go of it while waiting for that thread and the others.
    if (PyGILState_Check() != 0) {
      pybind11::gil_scoped_release release;
      shut_down();
    } else {
      shut_down();
    }
  }

  const std::string getBackendName() const override { return "atp"; }

  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override {
    check_cpu(tensors, "allreduce");
    at::Tensor t = tensors[0];
    if (t.scalar_type() != at::kFloat) {
      unsupported(std::string("allreduce of ") + c10::toString(t.scalar_type()) +
                  " tensors (ATP aggregates float32 as fixed-point integers)");
    }
    const c10d::ReduceOp::RedOpType op = opts.reduceOp;
    if (op != c10d::ReduceOp::SUM && op != c10d::ReduceOp::AVG) {
      unsupported("allreduce with this reduce op (only SUM and AVG: a switch adds integers)");
    }
    return enqueue(c10d::OpType::ALLREDUCE, tensors, [this, t, op]() mutable {
      at::Tensor c = t.contiguous();
      job_->communicator().allreduce(std::span<float>(c.data_ptr<float>(), static_cast<std::size_t>(c.numel())));
      if (op == c10d::ReduceOp::AVG) c.div_(getSize());
      if (!c.is_same(t)) t.copy_(c);
    });
  }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override {
    check_cpu(tensors, "broadcast");
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(), "atp broadcast: root rank ", opts.rootRank,
                " is not a rank of this group of ", getSize());
    at::Tensor t = tensors[0];
    const int root = static_cast<int>(opts.rootRank);
    return enqueue(c10d::OpType::BROADCAST, tensors, [this, t, root]() mutable {
      const std::string bytes = small_->broadcast(root, getRank() == root ? bytes_of(t) : std::string());
      if (getRank() != root) assign_bytes(t, bytes, "broadcast", root);
    });
  }

  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs, const c10d::AllgatherOptions&) override {
    check_cpu(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<std::size_t>(getSize()),
                "atp allgather: expected one output list of ", getSize(), " tensors");
    std::vector<at::Tensor> out = outputs[0];
    at::Tensor in = inputs[0];
    return enqueue(c10d::OpType::ALLGATHER, out, [this, in, out]() mutable {
      const std::vector<std::string> all = small_->allgather(bytes_of(in));
      for (int r = 0; r < getSize(); ++r)
        assign_bytes(out[static_cast<std::size_t>(r)], all[static_cast<std::size_t>(r)], "allgather", r);
    });
  }

  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions&) override {
    check_cpu({input}, "allgather");
    TORCH_CHECK(output.numel() == input.numel() * getSize() && output.scalar_type() == input.scalar_type(),
                "atp allgather: the output must hold ", getSize(), " inputs of the same dtype");
    at::Tensor in = input, out = output;
    return enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [this, in, out]() mutable {
      std::string joined;
      for (const std::string& part : small_->allgather(bytes_of(in))) joined += part;
      assign_bytes(out, joined, "allgather", -1);
    });
  }

  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions&) override {
    return enqueue(c10d::OpType::BARRIER, {}, [this] { small_->barrier(); });
  }

  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(std::vector<at::Tensor>&,
                                                     const c10d::AllreduceCoalescedOptions&) override {
    unsupported("allreduce_coalesced");
  }
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>&, const c10d::ReduceOptions&) override {
    unsupported("reduce");
  }
  c10::intrusive_ptr<c10d::Work> allgather_coalesced(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&,
                                                     const c10d::AllgatherOptions&) override {
    unsupported("allgather_coalesced");
  }
  c10::intrusive_ptr<c10d::Work> gather(std::vector<std::vector<at::Tensor>>&, std::vector<at::Tensor>&,
                                        const c10d::GatherOptions&) override {
    unsupported("gather");
  }
  c10::intrusive_ptr<c10d::Work> scatter(std::vector<at::Tensor>&, std::vector<std::vector<at::Tensor>>&,
                                         const c10d::ScatterOptions&) override {
    unsupported("scatter");
  }
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>&, std::vector<std::vector<at::Tensor>>&,
                                                const c10d::ReduceScatterOptions&) override {
    unsupported("reduce_scatter");
  }
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(at::Tensor&, at::Tensor&,
                                                      const c10d::ReduceScatterOptions&) override {
    unsupported("reduce_scatter");
  }
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor&, at::Tensor&, std::vector<int64_t>&, std::vector<int64_t>&,
                                               const c10d::AllToAllOptions&) override {
    unsupported("alltoall");
  }
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>&, std::vector<at::Tensor>&,
                                          const c10d::AllToAllOptions&) override {
    unsupported("alltoall");
  }
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>&, int, int) override { unsupported("send"); }
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>&, int, int) override { unsupported("recv"); }
  c10::intrusive_ptr<c10d::Work> recvAnysource(std::vector<at::Tensor>&, int) override { unsupported("recv"); }

 private:
  // Queues `body` on the group's thread (collectives run one at a time, in call order, as every
  // rank calls them); the Work completes when it has run.
  c10::intrusive_ptr<c10d::Work> enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<void()> body) {
    auto work = c10::make_intrusive<AtpWork>(type, std::move(outputs));
    {
      std::lock_guard lock(mutex_);
      queue_.push_back([work, body = std::move(body)] {
        std::exception_ptr error;
        try {
          body();
        } catch (...) {
          error = std::current_exception();
        }
        work->complete(error);
      });
    }
    wake_.notify_one();
    return work;
  }

  void shut_down() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    job_->close();
  }

  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) return;  // stopping, nothing left
        task = std::move(queue_.front());
        queue_.pop_front();
      }
      task();
    }
  }

  TorchStore store_;
  std::unique_ptr<ClusterJob> job_;
  std::unique_ptr<StoreCollectives> small_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;  // under mutex_
  bool stopping_ = false;                    // under mutex_
  std::thread thread_;
};

// What torch.distributed.Backend.register_backend calls: (store, rank, size, timeout).
c10::intrusive_ptr<c10d::ProcessGroup> create_process_group(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                                            int size, const std::chrono::duration<float>& timeout) {
  return c10::make_intrusive<ProcessGroupAtp>(store, rank, size, std::chrono::duration_cast<Duration>(timeout));
}

}  // namespace
}  // namespace atp::torch_backend

PYBIND11_MODULE(_C, module) {
  module.doc() = "ATP's torch.distributed backend (C++ part); import atp_torch instead";
  module.def("create_process_group", &atp::torch_backend::create_process_group, "the 'atp' backend's creator",
             pybind11::arg("store"), pybind11::arg("rank"), pybind11::arg("size"), pybind11::arg("timeout"));
}
