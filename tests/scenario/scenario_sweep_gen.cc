// The random-scenario sweep's generator (scenario_sweep_gen.h): a seeded builder of scenario
// documents (a small YAML tree whose leaves know their key's type and range), its YAML writer,
// and the mutations that turn a valid document into one the parser must refuse.
#include "scenario_sweep_gen.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "atp/fixed_point.h"
#include "atp/plan/plan.h"
#include "atp/scenario/scenario.h"

namespace atp::sweep {
namespace {

// --- randomness: splitmix64 by hand, so that a seed gives the same scenario with any standard library

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next() {
    std::uint64_t x = (state_ += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
  }
  std::uint64_t below(std::uint64_t n) { return n == 0 ? 0 : next() % n; }                       // [0, n)
  std::uint64_t between(std::uint64_t lo, std::uint64_t hi) { return lo + below(hi - lo + 1); }  // [lo, hi]
  bool percent(std::uint64_t p) { return below(100) < p; }
  template <class T>
  const T& pick(const std::vector<T>& v) {
    return v[below(v.size())];
  }
  template <class T>
  void shuffle(std::vector<T>& v) {
    for (std::size_t i = v.size(); i > 1; --i) std::swap(v[i - 1], v[below(i)]);
  }

 private:
  std::uint64_t state_;
};

std::uint64_t mix(std::uint64_t a, std::uint64_t b) { return Rng(a ^ (b * 0xD1B54A32D192ED03ull)).next(); }

// --- the document: a YAML tree whose scalar leaves carry their key's schema

enum class LeafKind {
  kNone,        // structural, never mutated as a value
  kInt,         // as_integer in [imin, imax]
  kNumber,      // a number in [nmin, nmax]; `nonzero`: 0 is refused too
  kBool,        //
  kEnum,        // one of a few words
  kHost,        // names a host
  kSwitch,      // names a switch
  kNode,        // names a host or a switch (a link fault's end)
  kSwitchName,  // a switch's own name
  kHostName,    // a host's own name
  kJobName,     // a job's name
  kText,        // free text (description)
};

struct Leaf {
  LeafKind kind = LeafKind::kNone;
  std::uint64_t imin = 0, imax = 0;
  double nmin = 0, nmax = 0;
  bool nonzero = false;
};

Leaf int_leaf(std::uint64_t lo, std::uint64_t hi) { return Leaf{LeafKind::kInt, lo, hi, 0, 0, false}; }
Leaf number_leaf(double lo, double hi, bool nonzero = false) { return Leaf{LeafKind::kNumber, 0, 0, lo, hi, nonzero}; }
Leaf kind_leaf(LeafKind k) { return Leaf{k, 0, 0, 0, 0, false}; }

constexpr std::uint64_t kU32Max = 0xFFFFFFFFull;
constexpr std::uint64_t kU64Max = ~0ull;
constexpr double kMaxUs = 9.0e12;

struct YNode;
struct Entry;

struct YNode {
  enum class Kind { kScalar, kMap, kList } kind = Kind::kScalar;
  bool flow = true;  // {..} / [..]; false: block style (root, topology, lists of entries)
  std::string text;  // scalar, written as is
  Leaf leaf;
  std::vector<Entry> entries;  // map
  std::vector<YNode> items;    // list

  YNode* get(const std::string& key);
};

struct Entry {
  std::string key;
  YNode value;
  bool required = false;  // the parser insists on it (its removal is an error naming the map)
};

YNode* YNode::get(const std::string& key) {
  for (Entry& e : entries) {
    if (e.key == key) return &e.value;
  }
  return nullptr;
}

YNode scalar(std::string text, Leaf leaf = {}) {
  YNode n;
  n.text = std::move(text);
  n.leaf = leaf;
  return n;
}
YNode map_node(bool flow) {
  YNode n;
  n.kind = YNode::Kind::kMap;
  n.flow = flow;
  return n;
}
YNode list_node(bool flow) {
  YNode n;
  n.kind = YNode::Kind::kList;
  n.flow = flow;
  return n;
}
void put(YNode& map, std::string key, YNode value, bool required = false) {
  map.entries.push_back(Entry{std::move(key), std::move(value), required});
}

void write_flow(const YNode& n, std::string& out) {
  switch (n.kind) {
    case YNode::Kind::kScalar:
      out += n.text;
      return;
    case YNode::Kind::kMap:
      out += '{';
      for (std::size_t i = 0; i < n.entries.size(); ++i) {
        if (i) out += ", ";
        out += n.entries[i].key + ": ";
        write_flow(n.entries[i].value, out);
      }
      out += '}';
      return;
    case YNode::Kind::kList:
      out += '[';
      for (std::size_t i = 0; i < n.items.size(); ++i) {
        if (i) out += ", ";
        write_flow(n.items[i], out);
      }
      out += ']';
      return;
  }
}

void write_block(const YNode& n, int indent, std::string& out) {
  const std::string pad(static_cast<std::size_t>(indent), ' ');
  if (n.kind == YNode::Kind::kList) {
    for (const YNode& item : n.items) {
      out += pad + "- ";
      write_flow(item, out);
      out += '\n';
    }
    return;
  }
  for (const Entry& e : n.entries) {
    out += pad + e.key + ":";
    if (e.value.kind != YNode::Kind::kScalar && !e.value.flow) {
      out += '\n';
      write_block(e.value, indent + 2, out);
    } else {
      out += ' ';
      write_flow(e.value, out);
      out += '\n';
    }
  }
}

std::string to_yaml(const YNode& root, const std::string& comment) {
  std::string out = "# " + comment + "\n";
  write_block(root, 0, out);
  return out;
}

// Numbers as the file writes them: integers, and fractions from integers (no printf rounding).
std::string num(std::uint64_t v) { return std::to_string(v); }
std::string thousandths(std::uint64_t k) {  // k / 1000, k <= 1000
  if (k >= 1000) return "1";
  std::string frac = std::to_string(k);
  return "0." + std::string(3 - frac.size(), '0') + frac;
}

// --- the valid scenario

struct Built {
  YNode root;
  Expectations expect;
  std::vector<std::string> features;
  // For the mutations: names and roles.
  std::vector<std::string> switches, hosts, worker_hosts, role_free_ps_hosts;
  std::vector<std::vector<std::string>> job_workers, job_ps;
  std::vector<std::string> job_names, job_algorithm;
  std::vector<std::uint64_t> job_rounds;
};

struct SwitchModel {
  std::string name;
  bool atp = true;
  std::uint32_t aggregators = 4096;
  std::uint32_t width = 1024;
  std::int64_t reclaim_us = 100000;
};

// Values per packet an aggregating switch can take: no wider than the narrowest ATP table.
// (2233: the widest that the links' default MTU, 9000 bytes, takes.)
const std::vector<std::uint64_t> kValuesPerPacket = {1, 2, 3, 7, 16, 31, 64, 100, 256, 1024, 2233};

Built build_valid(std::uint64_t seed, Rng& rng) {
  Built b;
  Expectations& ex = b.expect;
  auto feature = [&b](const std::string& f) {
    if (std::find(b.features.begin(), b.features.end(), f) == b.features.end()) b.features.push_back(f);
  };

  // Topology: 1-4 racks; with several, a core above them (ATP or plain), a chain or a star.
  const std::uint64_t racks = rng.between(1, 4);
  enum class Shape { kSingle, kCore, kChain, kStar } shape = Shape::kSingle;
  if (racks > 1) {
    const std::uint64_t s = rng.below(4);
    shape = s < 2 ? Shape::kCore : (s == 2 ? Shape::kChain : Shape::kStar);
  }
  std::vector<SwitchModel> switches;
  for (std::uint64_t r = 0; r < racks; ++r) switches.push_back(SwitchModel{"tor" + num(r)});
  if (shape == Shape::kCore) switches.push_back(SwitchModel{"core"});
  for (SwitchModel& s : switches) {
    s.atp = s.name == "core" ? rng.percent(65) : rng.percent(88);
    if (rng.percent(70)) {
      const std::uint64_t e = rng.below(17);
      std::uint64_t a = (1ull << e) + (rng.percent(50) ? rng.below(1ull << e) : 0);
      s.aggregators = static_cast<std::uint32_t>(std::min<std::uint64_t>(a, 65536));
    }
    if (rng.percent(30)) s.width = static_cast<std::uint32_t>(rng.pick<std::uint64_t>({1, 8, 62, 64, 256, 2048, 4096}));
    // At most 2^24 values (64 MiB) per table.
    s.aggregators = std::min<std::uint32_t>(s.aggregators, (1u << 24) / s.width);
    if (rng.percent(40)) {
      s.reclaim_us = static_cast<std::int64_t>(rng.pick<std::uint64_t>({0, 500, 2000, 10000, 50000, 200000}));
    }
  }
  // Hosts: workers (w*), PS hosts (p*), and a noise host (n0) if the scenario has noise.
  std::vector<std::string> tors;
  for (std::uint64_t r = 0; r < racks; ++r) tors.push_back("tor" + num(r));
  std::vector<std::string> all_switches;
  for (const SwitchModel& s : switches) all_switches.push_back(s.name);
  const std::uint64_t size_class = rng.below(10);
  const std::uint64_t worker_hosts =
      size_class < 5 ? rng.between(1, 8) : (size_class < 8 ? rng.between(9, 24) : rng.between(25, 64));
  std::vector<std::pair<std::string, std::string>> hosts;  // name, switch
  for (std::uint64_t w = 0; w < worker_hosts; ++w) {
    const std::string& sw = shape == Shape::kCore && rng.percent(5) ? std::string("core") : rng.pick(tors);
    hosts.emplace_back("w" + num(w), sw);
    b.worker_hosts.push_back("w" + num(w));
  }
  const std::uint64_t ps_hosts = rng.between(1, 4);
  std::vector<std::string> ps_names;
  for (std::uint64_t p = 0; p < ps_hosts; ++p) {
    hosts.emplace_back("p" + num(p), rng.pick(all_switches));
    ps_names.push_back("p" + num(p));
  }
  std::vector<std::string> atp_switches;
  for (const SwitchModel& s : switches) {
    if (s.atp) atp_switches.push_back(s.name);
  }
  const bool noise = !atp_switches.empty() && rng.percent(20);
  if (noise) hosts.emplace_back("n0", rng.pick(atp_switches));
  auto tor_of = [&hosts](const std::string& h) {
    for (const auto& [name, sw] : hosts) {
      if (name == h) return sw;
    }
    throw std::logic_error("no host " + h);
  };
  auto model_of = [&switches](const std::string& name) -> const SwitchModel& {
    for (const SwitchModel& s : switches) {
      if (s.name == name) return s;
    }
    throw std::logic_error("no switch " + name);
  };

  // Root keys.
  b.root = map_node(false);
  YNode& root = b.root;
  if (rng.percent(10))
    put(root, "description", scalar("\"sweep scenario " + num(seed) + "\"", kind_leaf(LeafKind::kText)));
  if (rng.percent(92)) put(root, "seed", scalar(num(rng.below(1000000)), int_leaf(0, kU64Max)));
  ex.time_limit_s = 60;
  if (rng.percent(85)) {
    ex.time_limit_s = rng.percent(80) ? 10 : 30;
    put(root, "time_limit_s", scalar(num(static_cast<std::uint64_t>(ex.time_limit_s)), number_leaf(0, 1e6, true)));
  }
  std::uint64_t default_buffer = 0;
  // Some link has a rate (so queues build at the switches' ports, which have buffers) and some
  // job does not back off (congestion_control: false): see may_fail below.
  bool rated = false, deaf_job = false;
  if (rng.percent(60)) {
    YNode link = map_node(true);
    if (rng.percent(60)) {
      put(link, "delay_us", scalar(rng.pick<std::string>({"0.5", "1", "2", "5", "10"}), number_leaf(0, kMaxUs)));
    }
    if (rng.percent(40)) {
      put(link, "rate_gbps", scalar(rng.pick<std::string>({"1", "10", "25", "100"}), number_leaf(0, 1e6)));
      rated = true;
    } else if (rng.percent(10)) {
      put(link, "rate_mbps", scalar("800", number_leaf(0, 1e9)));
      rated = true;
    }
    if (rng.percent(25)) {
      default_buffer = rng.pick<std::uint64_t>({20, 100, 1000});
      put(link, "buffer_packets", scalar(num(default_buffer), int_leaf(0, kU32Max)));
      feature("buffer-limit");
    }
    if (rng.percent(25)) {
      put(link, "ecn_threshold_packets", scalar(rng.pick<std::string>({"10", "40"}), int_leaf(0, kU32Max)));
      feature("ecn");
    }
    put(root, "link", std::move(link));
  }

  YNode topology = map_node(false);
  YNode sw_list = list_node(false);
  for (const SwitchModel& s : switches) {
    YNode m = map_node(true);
    put(m, "name", scalar(s.name, kind_leaf(LeafKind::kSwitchName)), true);
    if (!s.atp || rng.percent(40)) put(m, "atp", scalar(s.atp ? "true" : "false", kind_leaf(LeafKind::kBool)));
    if (s.aggregators != 4096 || rng.percent(20)) {
      put(m, "aggregators", scalar(num(s.aggregators), int_leaf(1, 1u << 24)));
    }
    if (s.width != 1024) put(m, "width", scalar(num(s.width), int_leaf(1, 4096)));
    if (s.reclaim_us != 100000)
      put(m, "reclaim_timeout_us", scalar(num(static_cast<std::uint64_t>(s.reclaim_us)), number_leaf(0, kMaxUs)));
    sw_list.items.push_back(std::move(m));
    b.switches.push_back(s.name);
    if (s.atp && s.reclaim_us == 0) ex.leaks_allowed = true;
    if (s.atp && s.aggregators < 64) feature("tiny-table");
  }
  put(topology, "switches", std::move(sw_list), true);
  YNode host_list = list_node(false);
  for (const auto& [name, sw] : hosts) {
    YNode m = map_node(true);
    put(m, "name", scalar(name, kind_leaf(LeafKind::kHostName)), true);
    put(m, "switch", scalar(sw, kind_leaf(LeafKind::kSwitch)), true);
    host_list.items.push_back(std::move(m));
    b.hosts.push_back(name);
  }
  put(topology, "hosts", std::move(host_list), true);
  std::vector<std::pair<std::string, std::string>> switch_links;
  for (std::uint64_t r = 1; r < racks; ++r) {
    if (shape == Shape::kChain) switch_links.emplace_back("tor" + num(r - 1), "tor" + num(r));
    if (shape == Shape::kStar) switch_links.emplace_back("tor0", "tor" + num(r));
  }
  if (shape == Shape::kCore) {
    for (std::uint64_t r = 0; r < racks; ++r) switch_links.emplace_back("tor" + num(r), "core");
  }
  if (!switch_links.empty() || rng.percent(10)) {
    YNode links = list_node(true);
    for (const auto& [a, c] : switch_links) {
      YNode pair = list_node(true);
      const bool swap = rng.percent(30);
      pair.items.push_back(scalar(swap ? c : a, kind_leaf(LeafKind::kSwitch)));
      pair.items.push_back(scalar(swap ? a : c, kind_leaf(LeafKind::kSwitch)));
      links.items.push_back(std::move(pair));
    }
    put(topology, "links", std::move(links));
  }
  put(root, "topology", std::move(topology), true);
  feature("racks=" + num(racks));
  if (shape == Shape::kCore) feature(model_of("core").atp ? "core-atp" : "core-plain");
  if (shape == Shape::kChain) feature("chain");
  if (shape == Shape::kStar) feature("star");

  // Jobs. Sizes are drawn against a budget of worker packets (workers x fragments x rounds), so
  // that a thousand scenarios run in minutes ...
  const std::uint64_t job_class = rng.below(10);
  const std::uint64_t jobs = job_class < 4 ? 1 : (job_class < 7 ? rng.between(2, 3) : rng.between(4, 8));
  const std::uint64_t budget = rng.percent(10) ? rng.between(1, 200) : rng.between(4000, 100000);
  std::uint64_t min_width = 4096;
  for (const SwitchModel& s : switches) {
    if (s.atp) min_width = std::min<std::uint64_t>(min_width, s.width);
  }
  YNode job_list = list_node(false);
  std::uint64_t atp_jobs = 0;
  for (std::uint64_t j = 0; j < jobs; ++j) {
    YNode m = map_node(true);
    const bool ps_algorithm = rng.percent(15);
    const std::string name = rng.percent(92) ? "j" + num(j) : std::string();
    b.job_names.push_back(name.empty() ? "job" + num(j + 1) : name);
    if (!name.empty()) put(m, "name", scalar(name, kind_leaf(LeafKind::kJobName)));
    if (ps_algorithm) {
      put(m, "algorithm", scalar("ps", kind_leaf(LeafKind::kEnum)));
      feature("algorithm-ps");
    } else if (rng.percent(15)) {
      put(m, "algorithm", scalar("atp", kind_leaf(LeafKind::kEnum)));
    }
    b.job_algorithm.push_back(ps_algorithm ? "ps" : "atp");
    atp_jobs += ps_algorithm ? 0 : 1;
    // Workers: a random subset of the worker hosts, at most 64 (a PS takes any number, a switch
    // where more than 32 meet only forwards).
    std::vector<std::string> pool = b.worker_hosts;
    rng.shuffle(pool);
    const std::uint64_t cap = std::min<std::uint64_t>(pool.size(), 64);
    const std::uint64_t wc = rng.below(10);
    std::uint64_t k = wc < 3 ? rng.between(1, std::min<std::uint64_t>(cap, 3)) : rng.between(1, cap);
    std::vector<std::string> workers(pool.begin(), pool.begin() + static_cast<std::ptrdiff_t>(k));
    // PS shards: dedicated PS hosts, now and then another job's worker host.
    std::vector<std::string> candidates = ps_names;
    if (rng.percent(15)) {
      for (const std::string& h : pool) {
        if (std::find(workers.begin(), workers.end(), h) == workers.end()) candidates.push_back(h);
      }
    }
    rng.shuffle(candidates);
    const std::uint64_t shards = std::min<std::uint64_t>(candidates.size(), rng.percent(60) ? 1 : rng.between(1, 4));
    std::vector<std::string> ps(candidates.begin(), candidates.begin() + static_cast<std::ptrdiff_t>(shards));
    if (shards > 1) feature("shards>1");
    YNode wl = list_node(true);
    for (const std::string& w : workers) wl.items.push_back(scalar(w, kind_leaf(LeafKind::kHost)));
    put(m, "workers", std::move(wl), true);
    YNode pl = list_node(true);
    for (const std::string& p : ps) pl.items.push_back(scalar(p, kind_leaf(LeafKind::kHost)));
    put(m, "ps", std::move(pl), true);
    b.job_workers.push_back(workers);
    b.job_ps.push_back(ps);

    // A width the file sets, or (a quarter of jobs) none: planning picks one, at most
    // kWidestChosenFragment and the narrowest aggregating switch's width; vpp is then that bound,
    // for the sizes below.
    const bool width_set = rng.percent(75);
    std::uint64_t vpp = std::min<std::uint64_t>(kWidestChosenFragment, ps_algorithm ? kMaxValuesPerPacket : min_width);
    if (width_set) {
      vpp = rng.pick(kValuesPerPacket);
      if (!ps_algorithm) vpp = std::min(vpp, min_width);
    }
    const std::uint64_t rounds = rng.percent(30) ? 1 : rng.between(1, 3);
    // ... and of values (16M, 64 MB through the network): wide packets carry many values each.
    constexpr std::uint64_t kValueBudget = std::uint64_t{16} << 20;
    const std::uint64_t per_round =
        std::max<std::uint64_t>(1, std::min(budget / jobs / (k * rounds), kValueBudget / jobs / (k * rounds) / vpp));
    const std::uint64_t fragments = rng.between(1, per_round);
    const std::uint64_t elements = std::max<std::uint64_t>(1, fragments * vpp - rng.below(vpp));
    put(m, "elements", scalar(num(elements), int_leaf(1, 1ull << 30)), true);
    if (rounds > 1 || rng.percent(20)) put(m, "rounds", scalar(num(rounds), int_leaf(1, 1u << 20)));
    if (rounds > 1 && rng.percent(20)) {
      put(m, "warmup_rounds", scalar(num(rng.below(rounds)), int_leaf(0, 1u << 20)));
    }
    b.job_rounds.push_back(rounds);
    if (width_set) put(m, "values_per_packet", scalar(num(vpp), int_leaf(1, 4096)));
    ex.values_per_packet.push_back(width_set ? vpp : 0);
    ex.elements.push_back(elements);
    ex.aggregated.push_back(!ps_algorithm);

    // Scale and magnitude: when workers x magnitude x scale reaches 2^31 the sum overflows int32
    // and takes the float32 path; at 3e38 float32 sums overflow to infinity.
    double scale = 1e8;
    if (rng.percent(30)) {
      const std::vector<std::pair<std::string, double>> scales = {{"1.0e6", 1e6}, {"1.0e4", 1e4},   {"1", 1},
                                                                  {"1.0e9", 1e9}, {"0.001", 0.001}, {"65536", 65536}};
      const auto& [text, value] = rng.pick(scales);
      put(m, "scale", scalar(text, number_leaf(0, 1.79e308, true)));
      scale = value;
    }
    double magnitude = 1.0;
    if (rng.percent(40)) {
      const std::vector<std::pair<std::string, double>> magnitudes = {
          {"0.001", 0.001}, {"0.5", 0.5}, {"2", 2},         {"6.5", 6.5},       {"100", 100},
          {"1.0e6", 1e6},   {"0", 0},     {"1.0e30", 1e30}, {"3.0e38", 3.0e38}, {"30", 30}};
      const auto& [text, value] = rng.pick(magnitudes);
      put(m, "magnitude", scalar(text, number_leaf(0, 3.0e38)));
      magnitude = value;
    }
    // A fragment position's first round is at the scale rounded down to a power of two, later
    // ones at the exponent the PS picked from the round before (docs/protocol.md "Scale per
    // fragment"). The float32 path is taken when the first round overflows, or when a fragment's
    // largest value is not resolved at its exponent; the check (scenario_sweep.cc) also allows it
    // for fragments of so few values that their largest may be far below magnitude / 2.
    const int first_exponent = initial_exponent(scale);
    const bool overflow = static_cast<double>(k) * (std::ldexp(magnitude, first_exponent) + 0.5) >= 2147483647.0;
    const bool unresolved = magnitude > 0 && std::ilogb(magnitude) - 1 + first_exponent <
                                                 std::min(23, kTargetBits - ceil_log2(static_cast<std::uint32_t>(k)));
    ex.may_overflow.push_back(overflow || unresolved);
    if (overflow) feature("overflow-possible");
    if (static_cast<double>(k) * magnitude > 3.4e38) feature("inf-possible");

    if (rng.percent(50)) {
      const std::string index = rng.pick<std::string>({"hashed", "linear", "hashed_slots", "allocated"});
      put(m, "index", scalar(index, kind_leaf(LeafKind::kEnum)));
      feature("index-" + index);
    }
    if (rng.percent(30)) {
      const bool cc = rng.percent(50);
      put(m, "congestion_control", scalar(cc ? "true" : "false", kind_leaf(LeafKind::kBool)));
      deaf_job = deaf_job || !cc;
    }
    if (rng.percent(20)) {
      const std::string recovery = rng.percent(50) ? "atp" : "timeout";
      put(m, "loss_recovery", scalar(recovery, kind_leaf(LeafKind::kEnum)));
      if (recovery == "timeout") feature("timeout-recovery");
    }
    std::uint64_t max_window = 1024;
    if (rng.percent(40)) {
      max_window = rng.pick<std::uint64_t>({1, 2, 4, 16, 64, 200, 1024});
      put(m, "max_window", scalar(num(max_window), int_leaf(1, 1u << 20)));
    }
    if (max_window < 200 || rng.percent(40)) {
      const std::uint64_t window = rng.percent(30) ? 1 : rng.between(1, max_window);
      put(m, "window", scalar(num(window), int_leaf(1, 1u << 20)));
      if (window == 1) feature("window=1");
    }
    if (rng.percent(30))
      put(m, "compute_us", scalar(rng.percent(20) ? "2.5" : num(rng.below(50)), number_leaf(0, kMaxUs)));
    if (rng.percent(30)) put(m, "start_us", scalar(num(rng.below(300)), number_leaf(0, kMaxUs)));
    if (rng.percent(40)) {
      put(m, "rto_us", scalar(num(rng.pick<std::uint64_t>({50, 100, 300, 1000, 3000})), number_leaf(0, kMaxUs, true)));
    }
    if (rng.percent(20)) {
      put(m, "progress_timeout_us",
          scalar(num(rng.pick<std::uint64_t>({500000, 1000000, 3000000})), number_leaf(0, kMaxUs, true)));
    }
    if (rng.percent(10)) {
      const bool wrap = rng.percent(70);
      put(m, "initial_seq", scalar(num(wrap ? kU32Max - rng.below(3000) : rng.below(1000)), int_leaf(0, kU32Max)));
      if (wrap) feature("seq-wrap");
    }
    job_list.items.push_back(std::move(m));
  }
  put(root, "jobs", std::move(job_list), false);  // optional: a file for atp discover may leave it out
  if (jobs > 1) feature("jobs>1");
  if (atp_jobs > 0 && rng.percent(15)) {
    put(root, "aggregator_sharing", scalar("static", kind_leaf(LeafKind::kEnum)));
    feature("static-sharing");
  } else if (rng.percent(8)) {
    put(root, "aggregator_sharing", scalar("dynamic", kind_leaf(LeafKind::kEnum)));
  }

  // Faults.
  ex.may_fail.assign(jobs, false);
  ex.must_fail.assign(jobs, false);
  YNode faults = list_node(false);
  // Every link of the topology, as (a, b) in planned order: host links then switch links.
  std::vector<std::pair<std::string, std::string>> links;
  for (const auto& [name, sw] : hosts) links.emplace_back(name, sw);
  for (const auto& l : switch_links) links.push_back(l);
  // Switch ports have a buffer and mark (`link:`'s, else switch_port_egress's); a host's NIC
  // queue has only the buffer `link:` gives it, and marks only where a fault says so.
  for (const auto& [a, c] : links) {
    const bool a_host = std::any_of(hosts.begin(), hosts.end(), [&](const auto& h) { return h.first == a; });
    ex.limited.insert(c + ">" + a);
    ex.marking.insert(c + ">" + a);
    if (!a_host) {
      ex.limited.insert(a + ">" + c);
      ex.marking.insert(a + ">" + c);
    } else if (default_buffer > 0) {
      ex.limited.insert(a + ">" + c);
    }
  }
  std::vector<std::function<void()>> fault_makers;
  const std::uint64_t link_faults = rng.percent(50) ? 0 : rng.between(1, 4);
  for (std::uint64_t f = 0; f < link_faults; ++f) {
    fault_makers.push_back([&] {
      const auto& [a, c] = rng.pick(links);
      const bool swap = rng.percent(30);
      const std::string from = swap ? c : a, to = swap ? a : c;
      YNode m = map_node(true);
      YNode pair = list_node(true);
      pair.items.push_back(scalar(from, kind_leaf(LeafKind::kNode)));
      pair.items.push_back(scalar(to, kind_leaf(LeafKind::kNode)));
      put(m, "link", std::move(pair), true);
      const bool one_way = rng.percent(30);
      if (one_way || rng.percent(10)) put(m, "one_way", scalar(one_way ? "true" : "false", kind_leaf(LeafKind::kBool)));
      std::vector<std::string> dirs = {from + ">" + to};
      if (!one_way) dirs.push_back(to + ">" + from);
      const bool outage = rng.percent(8);
      bool lossy = false, limited = false, marking = false;
      const Leaf probability = number_leaf(0, 1);
      if (outage) {
        put(m, "loss", scalar("1", probability));
        lossy = true;
        feature("outage");
      } else {
        if (rng.percent(50)) {
          const std::uint64_t k = rng.below(51);
          put(m, "loss", scalar(thousandths(k), probability));
          lossy = k > 0;
          feature("loss");
        }
        if (rng.percent(40)) {
          put(m, "duplicate", scalar(thousandths(rng.below(51)), probability));
          feature("duplicate");
        }
        if (rng.percent(40)) {
          put(m, "reorder", scalar(thousandths(rng.below(51)), probability));
          feature("reorder");
        }
      }
      if (rng.percent(15)) put(m, "delay_us", scalar(rng.pick<std::string>({"1", "20"}), number_leaf(0, kMaxUs)));
      if (rng.percent(10)) {
        put(m, "rate_gbps", scalar(rng.pick<std::string>({"1", "10"}), number_leaf(0, 1e6)));
        rated = true;
      }
      if (rng.percent(8)) {
        put(m, "buffer_packets", scalar(rng.pick<std::string>({"10", "50"}), int_leaf(0, kU32Max)));
        limited = true;
      }
      if (rng.percent(8)) {
        put(m, "ecn_threshold_packets", scalar("5", int_leaf(0, kU32Max)));
        marking = true;
      }
      if (outage || rng.percent(30)) {
        const std::uint64_t from_us = rng.below(3000);
        const std::uint64_t length = outage ? rng.between(1, 2000) : rng.between(1, 5000);
        if (from_us > 0 || rng.percent(30)) put(m, "from_us", scalar(num(from_us), number_leaf(0, kMaxUs)));
        put(m, "until_us", scalar(num(from_us + length), number_leaf(0, kMaxUs)));
        feature("windowed-fault");
      }
      for (const std::string& d : dirs) {
        if (lossy) ex.lossy.insert(d);
        if (limited) ex.limited.insert(d);
        if (marking) ex.marking.insert(d);
      }
      faults.items.push_back(std::move(m));
    });
  }
  // Which jobs a host takes part in (as a worker or a PS).
  auto jobs_of = [&b](const std::string& host, bool workers_only) {
    std::vector<std::size_t> out;
    for (std::size_t j = 0; j < b.job_workers.size(); ++j) {
      const auto& w = b.job_workers[j];
      const auto& p = b.job_ps[j];
      if (std::find(w.begin(), w.end(), host) != w.end() ||
          (!workers_only && std::find(p.begin(), p.end(), host) != p.end())) {
        out.push_back(j);
      }
    }
    return out;
  };
  if (rng.percent(15)) {
    fault_makers.push_back([&] {
      YNode m = map_node(true);
      const std::uint64_t kind = rng.below(10);
      std::string host;
      if (kind < 8) {
        const std::size_t j = rng.below(jobs);
        host = rng.pick(b.job_workers[j]);
      } else if (kind < 9) {
        host = rng.pick(ps_names);
      } else {
        host = rng.pick(b.hosts);
      }
      put(m, "crash", scalar(host, kind_leaf(LeafKind::kHost)), true);
      const bool runs_worker = !jobs_of(host, true).empty();
      if (runs_worker && rng.percent(50)) {
        const std::uint64_t at_round = rng.below(3);
        put(m, "at_round", scalar(num(at_round), int_leaf(0, kU32Max)), true);
        for (std::size_t j : jobs_of(host, true)) {
          if (at_round < b.job_rounds[j]) ex.must_fail[j] = true;
        }
        feature("crash-at-round");
      } else {
        put(m, "at_us", scalar(num(rng.below(20000)), number_leaf(0, kMaxUs)), true);
        feature("crash-at-time");
      }
      for (std::size_t j : jobs_of(host, false)) ex.may_fail[j] = true;
      faults.items.push_back(std::move(m));
    });
  }
  std::vector<std::string> restarted;
  if (rng.percent(15)) {
    fault_makers.push_back([&] {
      YNode m = map_node(true);
      const std::string sw = rng.pick(b.switches);
      restarted.push_back(sw);
      put(m, "restart", scalar(sw, kind_leaf(LeafKind::kSwitch)), true);
      put(m, "at_us", scalar(num(rng.below(20000)), number_leaf(0, kMaxUs)), true);
      if (rng.percent(50)) put(m, "down_us", scalar(num(rng.below(20000)), number_leaf(0, kMaxUs)));
      feature("restart");
      faults.items.push_back(std::move(m));
    });
  }
  if (noise) {
    fault_makers.push_back([&] {
      YNode m = map_node(true);
      put(m, "noise", scalar("n0", kind_leaf(LeafKind::kHost)), true);
      if (rng.percent(70)) {
        put(m, "rate_pps", scalar(num(rng.pick<std::uint64_t>({1000, 20000, 100000})), number_leaf(1, 1e6)));
      }
      if (rng.percent(30)) {
        const std::uint64_t from_us = rng.below(2000);
        put(m, "from_us", scalar(num(from_us), number_leaf(0, kMaxUs)));
        if (rng.percent(60)) put(m, "until_us", scalar(num(from_us + rng.between(1, 5000)), number_leaf(0, kMaxUs)));
      }
      feature("noise");
      faults.items.push_back(std::move(m));
    });
  }
  rng.shuffle(fault_makers);
  for (auto& make : fault_makers) make();
  if (!faults.items.empty()) put(root, "faults", std::move(faults));

  if (noise) {
    // Noise can be lost on the way (loss, a queue limit), duplicated, or arrive while its switch
    // is down: then fewer (or more) of the packets sent reach a running switch.
    const std::string tor = tor_of("n0");
    bool exact = std::find(restarted.begin(), restarted.end(), tor) == restarted.end();
    exact = exact && ex.lossy.count("n0>" + tor) == 0 && ex.limited.count("n0>" + tor) == 0;
    if (YNode* list = root.get("faults")) {
      for (YNode& f : list->items) {
        const YNode* link = f.get("link");
        if (link == nullptr || f.get("duplicate") == nullptr) continue;
        if (link->items[0].text == "n0" || link->items[1].text == "n0") exact = false;
      }
    }
    ex.noise_exact = exact;
  }
  // A crash of the job's own worker before its last round is a failure; a crash elsewhere in
  // the job may be one; may_fail includes must_fail.
  for (std::size_t j = 0; j < jobs; ++j) {
    if (ex.must_fail[j]) ex.may_fail[j] = true;
  }
  // A job that keeps its window whatever the network says can hold a port's buffer full, as any
  // unresponsive sender can, and the others' packets there are then dropped until they give up:
  // they may fail (never with a wrong result).
  if (rated && deaf_job && jobs > 1) ex.may_fail.assign(jobs, true);
  for (const std::string& p : ps_names) {
    if (jobs_of(p, true).empty()) b.role_free_ps_hosts.push_back(p);
  }
  return b;
}

// Whether the in-process backend can plan the scenario (static shares, a PS's memory budget):
// the generator draws again when it cannot, since those limits are the planner's refusals.
bool plannable(const std::string& yaml) {
  try {
    const Scenario s = parse_scenario_yaml(yaml, "sweep");
    const NetworkPlan network = plan_network(s.topology);
    for (const ScenarioJob& j : s.jobs) plan_job(network, j.spec);
    return true;
  } catch (const PlanError&) {
    return false;
  }
}

Built build_plannable(std::uint64_t seed, std::uint64_t salt) {
  for (std::uint64_t attempt = 0; attempt < 1000; ++attempt) {
    Rng rng(mix(mix(seed, salt), attempt));
    Built b = build_valid(seed, rng);
    if (plannable(to_yaml(b.root, "sweep"))) return b;
  }
  throw std::logic_error("scenario_sweep: no plannable scenario for seed " + std::to_string(seed) +
                         " in 1000 attempts (a generator bug)");
}

// --- mutations

struct Site {
  std::string path;  // the key path as the parser names it
  YNode* node;
};

std::string child(const std::string& path, const std::string& key) { return path.empty() ? key : path + "." + key; }
std::string item(const std::string& path, std::size_t i) { return path + "[" + std::to_string(i) + "]"; }

void collect(YNode& n, const std::string& path, std::vector<Site>& maps, std::vector<Site>& leaves) {
  if (n.kind == YNode::Kind::kScalar) {
    if (n.leaf.kind != LeafKind::kNone) leaves.push_back(Site{path, &n});
    return;
  }
  if (n.kind == YNode::Kind::kMap) {
    maps.push_back(Site{path, &n});
    for (Entry& e : n.entries) collect(e.value, child(path, e.key), maps, leaves);
    return;
  }
  for (std::size_t i = 0; i < n.items.size(); ++i) collect(n.items[i], item(path, i), maps, leaves);
}

std::string format_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

struct Mutation {
  std::string what, key, contains;
  bool at_run = false;
};

// Out-of-range or unparsable text for a leaf (never a value the key accepts).
std::vector<std::string> bad_values(const Leaf& leaf) {
  std::vector<std::string> v;
  switch (leaf.kind) {
    case LeafKind::kInt:
      v.push_back(leaf.imin >= 1 ? "0" : "-1");
      if (leaf.imax < kU64Max) v.push_back(std::to_string(leaf.imax + 1));
      v.push_back("1.5");
      v.push_back("lots");
      break;
    case LeafKind::kNumber:
      v.push_back("-1");
      if (leaf.nonzero) v.push_back("0");
      if (leaf.nmax < 1e300) v.push_back(format_double(leaf.nmax * 10 + 1));
      v.push_back("nan");
      v.push_back(".inf");
      v.push_back("fast");
      break;
    case LeafKind::kBool:
      v.push_back("maybe");
      v.push_back("2");
      break;
    case LeafKind::kEnum:
      v.push_back("bogus");
      break;
    case LeafKind::kHostName:
    case LeafKind::kSwitchName:
    case LeafKind::kJobName:
    case LeafKind::kHost:
    case LeafKind::kSwitch:
    case LeafKind::kNode:
    case LeafKind::kText:
      v.push_back("\"\"");
      break;
    case LeafKind::kNone:
      break;
  }
  v.push_back("~");  // null: "got nothing"
  return v;
}

// Picks and applies one mutation to `b`; returns what it did and what the refusal must name, and
// sets `kind` to the name of the kind of mutation.
Mutation mutate(Built& b, Rng& rng, std::string& kind) {
  std::vector<Site> maps, leaves;
  collect(b.root, "", maps, leaves);
  const auto pick_site = [&rng](const std::vector<Site>& sites) -> const Site& { return rng.pick(sites); };
  std::vector<std::function<std::optional<Mutation>()>> kinds;
  std::vector<std::string> kind_names;
  auto add = [&](const char* name, std::function<std::optional<Mutation>()> f) {
    kind_names.emplace_back(name);
    kinds.push_back(std::move(f));
  };

  // A value of the wrong type: a list or a map where a scalar belongs.
  add("wrong-type", [&]() -> std::optional<Mutation> {
    const Site& s = pick_site(leaves);
    const bool as_list = rng.percent(50);
    YNode replacement = as_list ? list_node(true) : map_node(true);
    if (as_list) {
      replacement.items.push_back(scalar("1"));
      replacement.items.push_back(scalar("2"));
    } else {
      put(replacement, "x", scalar("1"));
    }
    *s.node = std::move(replacement);
    return Mutation{s.path + " replaced by a " + (as_list ? "list" : "map"), s.path, as_list ? "a list" : "a map"};
  });
  // A value out of range or not parsable as its type.
  add("bad-value", [&]() -> std::optional<Mutation> {
    const Site& s = pick_site(leaves);
    const std::vector<std::string> bad = bad_values(s.node->leaf);
    const std::string v = rng.pick(bad);
    s.node->text = v;
    s.node->leaf = {};
    return Mutation{s.path + " set to " + v, s.path, ""};
  });
  // A dangling name: a host, switch or node reference to something that does not exist.
  add("dangling-name", [&]() -> std::optional<Mutation> {
    std::vector<Site> refs;
    for (const Site& s : leaves) {
      const LeafKind k = s.node->leaf.kind;
      if (k == LeafKind::kHost || k == LeafKind::kSwitch || k == LeafKind::kNode) refs.push_back(s);
    }
    if (refs.empty()) return std::nullopt;
    const Site& s = rng.pick(refs);
    s.node->text = "ghost" + std::to_string(rng.below(100));
    return Mutation{s.path + " names " + s.node->text, s.path, "'" + s.node->text + "'"};
  });
  // An unknown key (a typo of a real one, or a new word) in any map.
  add("unknown-key", [&]() -> std::optional<Mutation> {
    const Site& s = pick_site(maps);
    std::string key = "bogus_key";
    if (!s.node->entries.empty() && rng.percent(60)) key = rng.pick(s.node->entries).key + "s";
    if (s.node->get(key) != nullptr) key = "bogus_key";
    const std::size_t at = rng.below(s.node->entries.size() + 1);
    s.node->entries.insert(s.node->entries.begin() + static_cast<std::ptrdiff_t>(at), Entry{key, scalar("1"), false});
    // The root map's keys are checked before anything else; every other map's when it is read.
    return Mutation{"unknown key " + child(s.path, key), child(s.path, key), "unknown key"};
  });
  // A key written twice.
  add("duplicate-key", [&]() -> std::optional<Mutation> {
    const Site& s = pick_site(maps);
    if (s.node->entries.empty()) return std::nullopt;
    Entry copy = rng.pick(s.node->entries);
    const std::string key = copy.key;
    s.node->entries.push_back(std::move(copy));
    return Mutation{"key " + child(s.path, key) + " twice", child(s.path, key), "twice"};
  });
  // A required key left out.
  add("missing-required-key", [&]() -> std::optional<Mutation> {
    std::vector<std::pair<Site, std::size_t>> required;
    for (const Site& s : maps) {
      for (std::size_t i = 0; i < s.node->entries.size(); ++i) {
        if (s.node->entries[i].required) required.emplace_back(s, i);
      }
    }
    if (required.empty()) return std::nullopt;
    const auto& [s, i] = rng.pick(required);
    const std::string key = s.node->entries[i].key;
    s.node->entries.erase(s.node->entries.begin() + static_cast<std::ptrdiff_t>(i));
    return Mutation{"required key " + child(s.path, key) + " left out", s.path.empty() ? "scenario" : s.path, ""};
  });
  // A name used twice: a switch or host named like an earlier node, a job like an earlier job, a
  // worker listed twice.
  add("name-clash", [&]() -> std::optional<Mutation> {
    std::vector<std::string> earlier;
    std::vector<Site> names;
    for (const Site& s : leaves) {
      const LeafKind k = s.node->leaf.kind;
      if ((k == LeafKind::kSwitchName || k == LeafKind::kHostName) && !earlier.empty()) names.push_back(s);
      if (k == LeafKind::kSwitchName || k == LeafKind::kHostName) earlier.push_back(s.node->text);
    }
    if (names.empty()) return std::nullopt;
    const Site& s = rng.pick(names);
    std::vector<std::string> before;
    for (const std::string& n : earlier) {
      if (n == s.node->text) break;
      before.push_back(n);
    }
    const std::string name = rng.pick(before);
    s.node->text = name;
    return Mutation{s.path + " renamed to the existing " + name, s.path, "already used"};
  });
  add("job-name-clash", [&]() -> std::optional<Mutation> {
    YNode* jobs = b.root.get("jobs");
    if (jobs->items.size() < 2) return std::nullopt;
    const std::size_t j = rng.between(1, jobs->items.size() - 1);
    const std::string name = b.job_names[rng.below(j)];
    YNode& job = jobs->items[j];
    if (YNode* n = job.get("name")) {
      n->text = name;
    } else {
      job.entries.insert(job.entries.begin(), Entry{"name", scalar(name), false});
    }
    return Mutation{"jobs[" + std::to_string(j) + "] named like an earlier job", child(item("jobs", j), "name"),
                    "already used"};
  });
  add("worker-twice", [&]() -> std::optional<Mutation> {
    YNode* jobs = b.root.get("jobs");
    const std::size_t j = rng.below(jobs->items.size());
    YNode* workers = jobs->items[j].get("workers");
    if (workers->items.size() < 2) return std::nullopt;
    const std::size_t k = rng.between(1, workers->items.size() - 1);
    workers->items[k].text = workers->items[rng.below(k)].text;
    return Mutation{"a worker of jobs[" + std::to_string(j) + "] listed twice",
                    item(child(item("jobs", j), "workers"), k), "listed twice"};
  });
  // A worker that is a switch.
  add("worker-is-switch", [&]() -> std::optional<Mutation> {
    YNode* jobs = b.root.get("jobs");
    const std::size_t j = rng.below(jobs->items.size());
    YNode* workers = jobs->items[j].get("workers");
    const std::size_t k = rng.below(workers->items.size());
    workers->items[k].text = rng.pick(b.switches);
    return Mutation{"a worker of jobs[" + std::to_string(j) + "] is a switch",
                    item(child(item("jobs", j), "workers"), k), "is a switch"};
  });
  // A PS on a worker of its own job: the parser refuses it for atp jobs, the in-process backend
  // for ps jobs (no kernel to loop the PS's multicast back).
  add("ps-on-worker", [&]() -> std::optional<Mutation> {
    YNode* jobs = b.root.get("jobs");
    const std::size_t j = rng.below(jobs->items.size());
    YNode* ps = jobs->items[j].get("ps");
    const std::size_t k = rng.below(ps->items.size());
    ps->items[k].text = rng.pick(b.job_workers[j]);
    const std::string job_path = item("jobs", j);
    if (b.job_algorithm[j] == "ps") {
      return Mutation{"a PS of ps job " + job_path + " on one of its workers", child(job_path, "ps"),
                      "is also a worker", true};
    }
    return Mutation{"a PS of " + job_path + " on one of its workers", item(child(job_path, "ps"), k),
                    "is also a worker"};
  });
  // Rules between keys: warm-up rounds not fewer than rounds, a window above max_window, a fault
  // window that ends before it starts.
  add("warmup-or-window-rule", [&]() -> std::optional<Mutation> {
    YNode* jobs = b.root.get("jobs");
    const std::size_t j = rng.below(jobs->items.size());
    YNode& job = jobs->items[j];
    const std::string job_path = item("jobs", j);
    if (rng.percent(50)) {
      const std::string rounds = std::to_string(b.job_rounds[j]);
      if (YNode* w = job.get("warmup_rounds")) {
        w->text = rounds;
      } else {
        put(job, "warmup_rounds", scalar(rounds));
      }
      return Mutation{job_path + ".warmup_rounds = rounds", child(job_path, "warmup_rounds"), "fewer than rounds"};
    }
    YNode* max_window = job.get("max_window");
    const std::uint64_t max = max_window ? std::stoull(max_window->text) : 1024;
    if (YNode* w = job.get("window")) {
      w->text = std::to_string(max + 1);
    } else {
      put(job, "window", scalar(std::to_string(max + 1)));
    }
    return Mutation{job_path + ".window above max_window", child(job_path, max_window ? "max_window" : "window"),
                    "must not exceed max_window"};
  });
  add("fault-window-rule", [&]() -> std::optional<Mutation> {
    YNode* faults = b.root.get("faults");
    if (faults == nullptr) return std::nullopt;
    const std::size_t f = rng.below(faults->items.size());
    YNode& fault = faults->items[f];
    if (fault.get("restart") || fault.get("crash")) return std::nullopt;
    const std::string from = fault.get("from_us") ? fault.get("from_us")->text : "0";
    if (YNode* u = fault.get("until_us")) {
      u->text = from;
    } else {
      put(fault, "until_us", scalar(from));
    }
    return Mutation{item("faults", f) + ".until_us = from_us", child(item("faults", f), "until_us"), "after from_us"};
  });
  // Faults that break a rule of their kind: a crash with both times, a fault of two kinds, noise
  // from a host with a role, a crash at a round of a host that runs no worker, a link fault on
  // two nodes with no link between them.
  add("fault-kind-rule", [&]() -> std::optional<Mutation> {
    YNode* faults = b.root.get("faults");
    if (faults == nullptr) return std::nullopt;
    const std::size_t f = rng.below(faults->items.size());
    YNode& fault = faults->items[f];
    const std::string path = item("faults", f);
    if (YNode* crash = fault.get("crash")) {
      const std::uint64_t choice = rng.below(3);
      if (choice == 0) {
        if (!fault.get("at_round")) put(fault, "at_round", scalar("0"));
        if (!fault.get("at_us")) put(fault, "at_us", scalar("5"));
        return Mutation{path + " has at_round and at_us", path, "not both"};
      }
      if (choice == 1 && !b.role_free_ps_hosts.empty()) {
        crash->text = rng.pick(b.role_free_ps_hosts);
        fault.entries.erase(std::remove_if(fault.entries.begin(), fault.entries.end(),
                                           [](const Entry& e) { return e.key == "at_us" || e.key == "at_round"; }),
                            fault.entries.end());
        put(fault, "at_round", scalar("1"));
        return Mutation{path + " crashes a PS-only host at a round", child(path, "at_round"), "runs no worker"};
      }
    }
    if (YNode* noise = fault.get("noise")) {
      noise->text = rng.pick(rng.pick(b.job_workers));
      return Mutation{path + " noise from a worker host", child(path, "noise"), "noise needs a host of its own"};
    }
    if (YNode* link = fault.get("link")) {
      if (b.worker_hosts.size() >= 2 && rng.percent(50)) {
        link->items[0].text = b.worker_hosts[0];
        link->items[1].text = b.worker_hosts[1];
        return Mutation{path + " between two hosts", child(path, "link"), "there is no link"};
      }
    }
    put(fault, "restart", scalar(b.switches[0]));
    if (fault.get("restart") != &fault.entries.back().value) {
      // It already was a restart: make it a crash as well.
      fault.entries.pop_back();
      put(fault, "crash", scalar(b.hosts[0]));
    }
    return Mutation{path + " of two kinds", path, "exactly one of"};
  });
  // Switch links that are wrong: a self-link, a duplicate, or a missing one (the generated links
  // form a tree, so any one missing cuts a switch off).
  add("switch-links-wrong", [&]() -> std::optional<Mutation> {
    YNode* topology = b.root.get("topology");
    YNode* links = topology->get("links");
    if (links == nullptr || links->items.empty()) return std::nullopt;
    const std::uint64_t choice = rng.below(3);
    if (choice == 0) {
      links->items.erase(links->items.begin() + static_cast<std::ptrdiff_t>(rng.below(links->items.size())));
      return Mutation{"a switch link removed", "topology.links", "not connected"};
    }
    YNode extra = rng.pick(links->items);
    const std::string path = item("topology.links", links->items.size());
    if (choice == 1) {
      std::swap(extra.items[0], extra.items[1]);
      links->items.push_back(std::move(extra));
      return Mutation{"a switch link listed twice", path, "duplicate link"};
    }
    extra.items[1] = extra.items[0];
    links->items.push_back(std::move(extra));
    return Mutation{"a switch linked to itself", path, "itself"};
  });
  // More memory than any machine has: an aggregator table of 2^24 x 4096 values (256 GiB).
  add("memory-table", [&]() -> std::optional<Mutation> {
    YNode* switches = b.root.get("topology")->get("switches");
    std::vector<std::size_t> atp;
    for (std::size_t i = 0; i < switches->items.size(); ++i) {
      const YNode* flag = switches->items[i].get("atp");
      if (flag == nullptr || flag->text == "true") atp.push_back(i);
    }
    if (atp.empty()) return std::nullopt;
    const std::size_t i = rng.pick(atp);
    YNode& sw = switches->items[i];
    for (const char* key : {"aggregators", "width"}) {
      if (YNode* n = sw.get(key)) {
        n->text = key == std::string("width") ? "4096" : "16777216";
      } else {
        put(sw, key, scalar(key == std::string("width") ? "4096" : "16777216"));
      }
    }
    return Mutation{"topology.switches[" + std::to_string(i) + "] of 2^24 aggregators x 4096 values",
                    child(item("topology.switches", i), "aggregators"), "bytes"};
  });
  add("memory-elements", [&]() -> std::optional<Mutation> {
    // 2^30 values x 32 workers x 44 B: 1.5 TB.
    for (std::size_t j = 0; j < b.job_workers.size(); ++j) {
      if (b.job_workers[j].size() < 32) continue;
      b.root.get("jobs")->items[j].get("elements")->text = "1073741824";
      return Mutation{item("jobs", j) + ".elements = 2^30", child(item("jobs", j), "elements"), "bytes"};
    }
    return std::nullopt;
  });

  for (int tries = 0; tries < 100; ++tries) {
    const std::size_t k = rng.below(kinds.size());
    if (std::optional<Mutation> m = kinds[k]()) {
      kind = kind_names[k];
      return *m;
    }
  }
  throw std::logic_error("scenario_sweep: no mutation applies (a generator bug)");
}

}  // namespace

ValidScenario generate_valid(std::uint64_t seed) {
  Built b = build_plannable(seed, 0);
  ValidScenario v;
  v.seed = seed;
  v.yaml = to_yaml(
      b.root, "scenario_sweep seed " + std::to_string(seed) + " (scenario_sweep --print " + std::to_string(seed) + ")");
  v.expect = std::move(b.expect);
  v.features = std::move(b.features);
  std::sort(v.features.begin(), v.features.end());
  return v;
}

InvalidScenario generate_invalid(std::uint64_t seed) {
  Built b = build_plannable(seed, 0x1BADull);
  Rng rng(mix(seed, 0x5EEDull));
  InvalidScenario inv;
  inv.seed = seed;
  const std::string comment = "scenario_sweep invalid seed " + std::to_string(seed) +
                              " (scenario_sweep --print-invalid " + std::to_string(seed) + ")";
  if (rng.percent(5)) {
    // Not YAML: a flow collection left open.
    std::string text = to_yaml(b.root, comment);
    const std::size_t close = text.find_last_of("}]");
    text.erase(close, 1);
    inv.yaml = text;
    inv.mutation = "a bracket left open";
    inv.kind = "not-yaml";
    inv.key = "scenario";  // the source name the caller passes
    inv.contains = "not valid YAML";
    return inv;
  }
  std::string kind;
  const Mutation m = mutate(b, rng, kind);
  inv.yaml = to_yaml(b.root, comment + ": " + m.what);
  inv.mutation = m.what;
  inv.key = m.key;
  inv.contains = m.contains;
  inv.at_run = m.at_run;
  inv.kind = kind;
  return inv;
}

}  // namespace atp::sweep
