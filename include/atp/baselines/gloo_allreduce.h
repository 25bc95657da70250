// Gloo's allreduce (Debian's libgloo) behind atp::Allreduce: the library baseline ATP is compared
// against, over Gloo's TCP transport with a FileStore rendezvous.
//
// Algorithms: kRing is gloo::allreduce with Algorithm::RING, the bandwidth-optimal ring PyTorch's
// gloo backend uses (each rank sends 2(n-1)/n of the buffer). Not gloo::AllreduceRing: that class
// passes the whole buffer around n-1 times, so it reaches only link/(n-1) and would flatter ATP.
// kHalvingDoubling is gloo::AllreduceHalvingDoubling<float> (log2(n) steps; any n).
//
// Ending a job: call close() on every rank after the last allreduce. It is a barrier, so no rank
// tears its connections down while another still reads from them; without it Gloo may report
// "Connection closed by peer" on a rank that is still finishing (PLATFORM-NOTES). The destructor
// does not wait: destroying the object without close() looks to the peers like a crash.
//
// SIGPIPE: Gloo's TCP transport writes with writev(), which raises SIGPIPE when a peer has gone;
// a process using it must ignore SIGPIPE (`atp worker` does, and so does Python) to get Gloo's
// error instead of dying.
#pragma once

#include <cstddef>
#include <memory>
#include <span>
#include <string>
#include <string_view>

#include "atp/collectives/allreduce.h"
#include "atp/time.h"

namespace atp {

enum class GlooAlgorithm {
  kRing,             // gloo::allreduce, Algorithm::RING
  kHalvingDoubling,  // gloo::AllreduceHalvingDoubling<float>
};

// "ring" or "halving_doubling"; throws std::invalid_argument naming the text otherwise.
GlooAlgorithm parse_gloo_algorithm(std::string_view text);

struct GlooAllreduceConfig {
  int rank = 0;
  int size = 1;
  // The IPv4 address Gloo's TCP device binds (its port is picked by the kernel): this host's own
  // address, so each network namespace uses its interface, e.g. "10.0.0.3" or "127.0.0.1".
  std::string local_ip = "127.0.0.1";
  // An existing directory every rank can read and write (processes in different network
  // namespaces still share the file system): the rendezvous FileStore.
  std::string store_dir;
  // Unique per run and the same on every rank: the store's keys are files that cannot be written
  // twice, so each run uses its own PrefixStore prefix in the same directory.
  std::string run_prefix = "atp";
  GlooAlgorithm algorithm = GlooAlgorithm::kRing;
  // Bounds the rendezvous (a rank that never joins), connecting, and each allreduce / close().
  Duration timeout = std::chrono::seconds(30);
};

class GlooAllreduce : public Allreduce {
 public:
  // Rendezvous and a full TCP mesh between all ranks (Gloo connects every pair). Throws
  // std::invalid_argument for a bad rank or size and CollectiveError if the device cannot bind
  // local_ip, a rank does not join within the timeout, or connecting fails.
  explicit GlooAllreduce(const GlooAllreduceConfig& config);
  ~GlooAllreduce() override;
  GlooAllreduce(const GlooAllreduce&) = delete;
  GlooAllreduce& operator=(const GlooAllreduce&) = delete;

  // Throws CollectiveError (Gloo's reason, e.g. a timeout or "Connection closed by peer" with the
  // peer's address) and stays failed afterwards. Reuses the halving-doubling instance while the
  // same buffer (pointer and size) comes back, as a training loop's gradient buffer does.
  void allreduce(std::span<float> data) override;
  std::string_view algorithm() const override;
  // A barrier over every rank, then the connections close; later allreduce calls throw.
  void close() override;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace atp
