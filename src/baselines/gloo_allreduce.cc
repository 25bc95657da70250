// atp::GlooAllreduce: a Gloo TCP device on the given address, a FileStore rendezvous bounded by
// the timeout, and gloo::allreduce (ring) or AllreduceHalvingDoubling; Gloo errors become
// CollectiveError.
#include "atp/baselines/gloo_allreduce.h"

#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/barrier.h>
#include <gloo/common/error.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/prefix_store.h>
#include <gloo/transport/tcp/device.h>
#include <sys/socket.h>

#include <climits>
#include <cstdint>
#include <cstdio>
#include <stdexcept>
#include <vector>

#include "atp/time.h"

namespace atp {
namespace {

// Gloo's messages start with one or more "[/path/file.cc:123] "; the reason follows.
std::string gloo_reason(const std::exception& e) {
  std::string text = e.what();
  while (text.size() > 1 && text[0] == '[') {
    const auto end = text.find("] ");
    if (end == std::string::npos) break;
    text.erase(0, end + 2);
  }
  return text;
}

// Bounds every wait of the rendezvous by the caller's timeout. Why: Gloo's TCP context reads the
// peers' addresses with get(), which waits with the store's 30 s default, so a rank that never
// joins would otherwise hold the others for 30 s whatever timeout was asked for.
class DeadlineStore : public gloo::rendezvous::Store {
 public:
  DeadlineStore(gloo::rendezvous::Store& inner, std::chrono::milliseconds timeout) : inner_(inner), timeout_(timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override { inner_.set(key, data); }
  std::vector<char> get(const std::string& key) override {
    wait({key});
    return inner_.get(key);
  }
  void wait(const std::vector<std::string>& keys) override { wait(keys, timeout_); }
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    try {
      inner_.wait(keys, timeout);
    } catch (const gloo::IoException&) {
      std::string names;
      for (const auto& key : keys) names += (names.empty() ? "" : ", ") + key;
      // FileStore's timeout counts whole seconds, so the wait may last up to 1 s longer.
      throw gloo::IoException("rendezvous key(s) " + names + " did not appear in the store within " +
                              format_duration(timeout) + ": a rank did not join");
    }
  }

 private:
  gloo::rendezvous::Store& inner_;
  std::chrono::milliseconds timeout_;
};

}  // namespace

GlooAlgorithm parse_gloo_algorithm(std::string_view text) {
  if (text == "ring") return GlooAlgorithm::kRing;
  if (text == "halving_doubling") return GlooAlgorithm::kHalvingDoubling;
  throw std::invalid_argument("unknown gloo algorithm '" + std::string(text) + "'; use ring or halving_doubling");
}

struct GlooAllreduce::Impl {
  GlooAllreduceConfig config;
  std::chrono::milliseconds timeout;
  std::string who;  // "gloo ring allreduce on rank 1 of 4": how errors start
  std::shared_ptr<gloo::rendezvous::Context> context;
  std::uint32_t next_tag = 0;  // one per collective, as PyTorch does
  // The cached halving-doubling instance and the buffer it was built for (its constructor
  // registers buffers with every pair, so it is built once per buffer, not per call).
  std::unique_ptr<gloo::AllreduceHalvingDoubling<float>> halving_doubling;
  const float* hd_data = nullptr;
  std::size_t hd_count = 0;
  std::string failure;  // set once failed or closed: later calls throw it

  [[noreturn]] void fail(const std::string& what) {
    failure = who + " failed: " + what;
    halving_doubling.reset();
    context.reset();  // closes the connections, so the peers fail now rather than at their timeout
    throw CollectiveError(failure);
  }
};

GlooAllreduce::GlooAllreduce(const GlooAllreduceConfig& config) : impl_(std::make_unique<Impl>()) {
  if (config.size < 1 || config.rank < 0 || config.rank >= config.size)
    throw std::invalid_argument("gloo allreduce: rank " + std::to_string(config.rank) + " is not in [0, " +
                                std::to_string(config.size) + "); size must be at least 1");
  if (config.timeout <= Duration::zero()) throw std::invalid_argument("gloo allreduce: the timeout must be positive");
  Impl& impl = *impl_;
  impl.config = config;
  impl.timeout = std::chrono::ceil<std::chrono::milliseconds>(config.timeout);
  impl.who = std::string(config.algorithm == GlooAlgorithm::kRing ? "gloo ring" : "gloo halving-doubling") +
             " allreduce on rank " + std::to_string(config.rank) + " of " + std::to_string(config.size);
  std::shared_ptr<gloo::transport::Device> device;
  try {
    gloo::transport::tcp::attr attr(config.local_ip.c_str());
    attr.ai_family = AF_INET;
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {
    throw CollectiveError(impl.who + ": cannot open a Gloo TCP device on " + config.local_ip + ": " + gloo_reason(e));
  }
  try {
    gloo::rendezvous::FileStore files(config.store_dir);
    gloo::rendezvous::PrefixStore run(config.run_prefix, files);
    DeadlineStore store(run, impl.timeout);
    auto context = std::make_shared<gloo::rendezvous::Context>(config.rank, config.size);
    context->setTimeout(impl.timeout);  // before connecting: every pair takes its timeout from here
    context->connectFullMesh(store, device);
    impl.context = std::move(context);
  } catch (const std::exception& e) {
    throw CollectiveError(impl.who + ": cannot connect to the other ranks (rendezvous in " + config.store_dir +
                          ", prefix " + config.run_prefix + "): " + gloo_reason(e));
  }
}

GlooAllreduce::~GlooAllreduce() = default;

std::string_view GlooAllreduce::algorithm() const {
  return impl_->config.algorithm == GlooAlgorithm::kRing ? "gloo_ring" : "gloo_halving_doubling";
}

void GlooAllreduce::allreduce(std::span<float> data) {
  Impl& impl = *impl_;
  if (!impl.failure.empty()) throw CollectiveError(impl.failure);
  // Nothing to move (and Gloo's algorithms expect at least one element); every rank skips alike.
  if (data.empty() || impl.config.size == 1) return;
  try {
    if (impl.config.algorithm == GlooAlgorithm::kRing) {
      gloo::AllreduceOptions options(impl.context);
      options.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
      options.setOutput(data.data(), data.size());  // in place: the output is also the input
      options.setReduceFunction(static_cast<void (*)(void*, const void*, const void*, std::size_t)>(&gloo::sum<float>));
      options.setTag(impl.next_tag++);
      options.setTimeout(impl.timeout);
      gloo::allreduce(options);
    } else {
      if (data.size() > static_cast<std::size_t>(INT_MAX))
        throw std::invalid_argument(impl.who + ": Gloo's halving-doubling takes at most INT_MAX elements");
      if (!impl.halving_doubling || impl.hd_data != data.data() || impl.hd_count != data.size()) {
        impl.halving_doubling.reset();
        impl.halving_doubling = std::make_unique<gloo::AllreduceHalvingDoubling<float>>(
            impl.context, std::vector<float*>{data.data()}, static_cast<int>(data.size()));
        impl.hd_data = data.data();
        impl.hd_count = data.size();
      }
      impl.halving_doubling->run();
    }
  } catch (const gloo::Exception& e) {
    impl.fail(gloo_reason(e));
  }
}

void GlooAllreduce::close() {
  Impl& impl = *impl_;
  if (!impl.failure.empty()) return;  // already failed or closed: nothing left to end cleanly
  if (impl.config.size > 1) {
    try {
      gloo::BarrierOptions options(impl.context);
      options.setTag(impl.next_tag++);
      options.setTimeout(impl.timeout);
      gloo::barrier(options);
    } catch (const gloo::Exception& e) {
      impl.fail("the closing barrier: " + gloo_reason(e));
    }
  }
  impl.failure = impl.who + ": the allreduce was closed";
  impl.halving_doubling.reset();
  impl.context.reset();
}

}  // namespace atp
