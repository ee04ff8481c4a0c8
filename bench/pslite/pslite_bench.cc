// pslite_bench: ps-lite (github.com/dmlc/ps-lite, MXNet's parameter server) moving a parameter
// set the way bench/ps_pushpull moves it through Fulcrum, for bench/compare_pslite.sh.
//
// One binary, every role, as ps-lite's own tests do: DMLC_ROLE=scheduler|server|worker with
// DMLC_NUM_SERVER, DMLC_NUM_WORKER, DMLC_PS_ROOT_URI, DMLC_PS_ROOT_PORT (and DMLC_NODE_HOST=
// 127.0.0.1 so that servers and workers bind loopback) in the environment.
//  - server: a KVServer<float> whose handle is plain SGD, w -= lr * g per key (the store starts at
//    zero and grows on a key's first push); a pull copies the key's values into a new reply (as
//    Fulcrum's PS encodes a new reply), so a reply never aliases values a later push changes.
//  - worker: the parameter set is --model_bytes of float32 cut into keys of at most
//    --chunk_bytes (Fulcrum's chunking: runtime/cluster/chunk_plan.h, --rpc_chunk_bytes, 2 MiB by
//    default), spread over the servers round-robin. One round = every key pushed and its new
//    values pulled back: --mode=chunked (default) sends one ZPushPull per key, all in flight,
//    then waits for all (Fulcrum's PushPullAll: one PushPull RPC per chunk, all in flight);
//    --mode=single sends the whole set as one ZPushPull (ps-lite slices it into one message per
//    server). Zero-copy on the worker side: the gradients go out from, and the values are
//    copied by ps-lite into, the worker's own arrays.
//  - Timing: --warmup_s of unreported rounds, then a file barrier (--barrier_dir) so every
//    worker's window starts together, then --seconds of rounds; each worker prints one RESULT
//    line (pushpull_common.h). After the window the worker checks that the values it pulled last
//    are what SGD from zero gives (equal within a key, negative).
//
// Flags (--name=value): --model_bytes (required; a multiple of 4) --chunk_bytes=2097152
// --mode=chunked|single --warmup_s=1 --seconds=3 --lr=1e-6 --barrier_dir (workers).
// A bad flag exits 2 naming it.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "bench/pslite/pushpull_common.h"
#include "ps/ps.h"

namespace {

struct Options {
  int64_t model_bytes = 0;
  int64_t chunk_bytes = int64_t{2} << 20;
  std::string mode = "chunked";
  double warmup_s = 1;
  double seconds = 3;
  float lr = 1e-6f;
  std::string barrier_dir;
};

[[noreturn]] void BadFlag(const std::string& flag, const std::string& why) {
  std::fprintf(stderr, "pslite_bench: --%s: %s\n", flag.c_str(), why.c_str());
  std::exit(2);
}

double ParseDouble(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const double v = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || !std::isfinite(v)) BadFlag(flag, "not a number: " + value);
  return v;
}

int64_t ParseInt(const std::string& flag, const std::string& value) {
  char* end = nullptr;
  const long long v = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0') BadFlag(flag, "not an integer: " + value);
  return v;
}

Options ParseOptions(int argc, char** argv) {
  Options o;
  bool have_model = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      std::fprintf(stderr, "pslite_bench: unexpected argument '%s'\n", arg.c_str());
      std::exit(2);
    }
    const size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (eq == std::string::npos) BadFlag(name, "needs a value (--" + name + "=...)");
    const std::string value = arg.substr(eq + 1);
    if (name == "model_bytes") {
      o.model_bytes = ParseInt(name, value);
      have_model = true;
    } else if (name == "chunk_bytes") {
      o.chunk_bytes = ParseInt(name, value);
    } else if (name == "mode") {
      o.mode = value;
    } else if (name == "warmup_s") {
      o.warmup_s = ParseDouble(name, value);
    } else if (name == "seconds") {
      o.seconds = ParseDouble(name, value);
    } else if (name == "lr") {
      o.lr = static_cast<float>(ParseDouble(name, value));
    } else if (name == "barrier_dir") {
      o.barrier_dir = value;
    } else {
      BadFlag(name, "unknown flag");
    }
  }
  if (!have_model) BadFlag("model_bytes", "required");
  if (o.model_bytes <= 0 || o.model_bytes % 4 != 0) {
    BadFlag("model_bytes", "must be a positive multiple of 4 (float32 values)");
  }
  if (o.chunk_bytes < 4) BadFlag("chunk_bytes", "must be at least 4");
  if (o.mode != "chunked" && o.mode != "single") BadFlag("mode", "chunked or single");
  if (o.warmup_s < 0) BadFlag("warmup_s", "must be >= 0");
  if (o.seconds <= 0) BadFlag("seconds", "must be > 0");
  return o;
}

// ---- server ----------------------------------------------------------------------------------

// Plain SGD per key: w -= lr * g on push; a pull answers a copy of w.
struct SgdHandle {
  float lr = 0;
  std::unordered_map<ps::Key, std::vector<float>> store;

  void operator()(const ps::KVMeta& meta, const ps::KVPairs<float>& req,
                  ps::KVServer<float>* server) {
    const size_t n = req.keys.size();
    // Each key's length: from lens when sent, else an equal share of the pushed values, else
    // (a pull) what the store holds.
    std::vector<size_t> len(n);
    size_t total = 0;
    for (size_t i = 0; i < n; ++i) {
      if (!req.lens.empty()) {
        len[i] = static_cast<size_t>(req.lens[i]);
      } else if (meta.push) {
        len[i] = req.vals.size() / n;
      } else {
        auto it = store.find(req.keys[i]);
        CHECK(it != store.end()) << "pull of key " << req.keys[i] << " never pushed";
        len[i] = it->second.size();
      }
      total += len[i];
    }
    if (meta.push) CHECK_EQ(total, req.vals.size()) << "values do not match the keys' lengths";
    ps::KVPairs<float> res;
    float* out = nullptr;
    if (meta.pull) {
      res.keys = req.keys;
      if (!req.lens.empty()) res.lens = req.lens;
      out = new float[total];
      res.vals = ps::SArray<float>(out, total, /*deletable=*/true);
    }
    size_t offset = 0;
    for (size_t i = 0; i < n; ++i) {
      std::vector<float>& w = store[req.keys[i]];
      if (meta.push) {
        if (w.empty()) w.assign(len[i], 0.0f);
        CHECK_EQ(w.size(), len[i]) << "key " << req.keys[i] << " changed length";
        const float* g = req.vals.data() + offset;
        const float rate = lr;
        float* wp = w.data();
        for (size_t j = 0; j < len[i]; ++j) wp[j] -= rate * g[j];
      }
      if (meta.pull) {
        CHECK_EQ(w.size(), len[i]);
        std::memcpy(out + offset, w.data(), len[i] * sizeof(float));
      }
      offset += len[i];
    }
    server->Response(meta, res);
  }
};

// ---- worker ----------------------------------------------------------------------------------

struct Chunk {
  ps::Key key = 0;
  size_t offset = 0;  // into the worker's arrays (laid out in key order)
  size_t count = 0;
};

// Cuts `elements` into pieces of at most chunk_elems, chunk c on server c % S, at that
// server's key range begin + c / S; returned in key order with offsets in that order.
std::vector<Chunk> PlanKeys(int64_t elements, int64_t chunk_elems,
                            const std::vector<ps::Range>& ranges) {
  std::vector<Chunk> chunks;
  const size_t servers = ranges.size();
  for (int64_t begin = 0, c = 0; begin < elements; begin += chunk_elems, ++c) {
    Chunk chunk;
    chunk.key =
        ranges[static_cast<size_t>(c) % servers].begin() + static_cast<ps::Key>(c) / servers;
    chunk.count = static_cast<size_t>(std::min(chunk_elems, elements - begin));
    chunks.push_back(chunk);
  }
  std::sort(chunks.begin(), chunks.end(),
            [](const Chunk& a, const Chunk& b) { return a.key < b.key; });
  size_t offset = 0;
  for (Chunk& c : chunks) {
    c.offset = offset;
    offset += c.count;
  }
  return chunks;
}

int RunWorker(const Options& o) {
  const int rank = ps::MyRank();
  const int workers = ps::NumWorkers();
  const int servers = ps::NumServers();
  ps::KVWorker<float> kv(0, 0);
  const int64_t elements = o.model_bytes / 4;
  const std::vector<Chunk> chunks = PlanKeys(elements, std::max<int64_t>(1, o.chunk_bytes / 4),
                                             ps::Postoffice::Get()->GetServerKeyRanges());
  std::vector<float> grads(static_cast<size_t>(elements), 1e-3f);
  std::vector<float> values(static_cast<size_t>(elements), 0.0f);

  // Views of the worker's arrays; ps-lite keeps pointers to the out arrays until the reply.
  std::vector<ps::SArray<ps::Key>> keys;
  std::vector<ps::SArray<float>> vals, outs;
  for (const Chunk& c : chunks) {
    keys.push_back(ps::SArray<ps::Key>{c.key});
    vals.emplace_back(grads.data() + c.offset, c.count, false);
    outs.emplace_back(values.data() + c.offset, c.count, false);
  }
  ps::SArray<ps::Key> all_keys;
  ps::SArray<int> all_lens;
  bool equal_lens = true;
  for (const Chunk& c : chunks) equal_lens = equal_lens && c.count == chunks[0].count;
  {
    std::vector<ps::Key> k;
    std::vector<int> l;
    for (const Chunk& c : chunks) {
      k.push_back(c.key);
      l.push_back(static_cast<int>(c.count));
    }
    all_keys = ps::SArray<ps::Key>(k);
    if (!equal_lens) all_lens = ps::SArray<int>(l);  // else ps-lite splits the values evenly
  }
  ps::SArray<float> all_vals(grads.data(), grads.size(), false);
  ps::SArray<float> all_outs(values.data(), values.size(), false);

  std::vector<int> ts(chunks.size());
  std::function<bool()> round;
  if (o.mode == "chunked") {
    round = [&] {
      for (size_t c = 0; c < chunks.size(); ++c) ts[c] = kv.ZPushPull(keys[c], vals[c], &outs[c]);
      for (int t : ts) kv.Wait(t);
      return true;
    };
  } else {
    round = [&] {
      kv.Wait(kv.ZPushPull(all_keys, all_vals, &all_outs, equal_lens ? nullptr : &all_lens));
      return true;
    };
  }
  pushpull::RunFor(o.warmup_s > 0 ? o.warmup_s : 1e-9, round);
  if (!pushpull::FileBarrier(o.barrier_dir, "measure", rank, workers, 60)) {
    std::fprintf(stderr, "pslite_bench: worker %d: barrier in %s timed out\n", rank,
                 o.barrier_dir.c_str());
    return 1;
  }
  const pushpull::Timed t = pushpull::RunFor(o.seconds, round);
  pushpull::PrintResult("pslite", rank, workers, servers, o.model_bytes,
                        static_cast<int>(chunks.size()), t);
  // SGD from zero with constant gradients leaves every value of a key equal and negative.
  for (const Chunk& c : chunks) {
    const float first = values[c.offset], last = values[c.offset + c.count - 1];
    if (!(first < 0) || first != last) {
      std::fprintf(stderr, "pslite_bench: worker %d: key %llu pulled %g .. %g (want equal, < 0)\n",
                   rank, static_cast<unsigned long long>(c.key), first, last);
      return 1;
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  const Options o = ParseOptions(argc, argv);
  const char* role = std::getenv("DMLC_ROLE");
  if (role == nullptr) {
    std::fprintf(stderr, "pslite_bench: DMLC_ROLE (scheduler, server or worker) is not set\n");
    return 2;
  }
  if (std::string(role) == "worker" && o.barrier_dir.empty()) {
    BadFlag("barrier_dir", "required on workers");
  }
  // Registers with the scheduler without the start barrier, creates the server's KVServer,
  // and only then joins the barrier of every node (as MXNet's kvstore does). With
  // ps::Start(0) (its barrier first, then the KVServer, like ps-lite's tests) a worker released
  // by the barrier may send data before the server's own barrier release arrives on another
  // connection: the server's receiving thread then waits for a customer that the blocked main
  // thread never creates and aborts after 5 s ("timeout (5 sec) to wait App 0 customer 0
  // ready"), which happened here under load.
  ps::StartAsync(0);
  std::unique_ptr<ps::KVServer<float>> server;
  if (ps::IsServer()) {
    server = std::make_unique<ps::KVServer<float>>(0);
    SgdHandle handle;
    handle.lr = o.lr;
    server->set_request_handle(handle);
  }
  ps::Postoffice::Get()->Barrier(0, ps::kWorkerGroup + ps::kServerGroup + ps::kScheduler);
  int rc = 0;
  if (ps::IsWorker()) rc = RunWorker(o);
  ps::Finalize(0, true);  // a barrier of every node, then the van stops
  return rc;
}
