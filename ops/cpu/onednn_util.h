// ops/cpu (internal, oneDNN builds only): what the oneDNN wrappers share: the CPU engine, a
// primitive run from a fixed argument array (no allocation per call), aligned buffers, and
// memory objects bound to the caller's pointers per call.
// Thread-safety: the engine is shared (oneDNN's engines are thread-safe); the rest belongs to
// one wrapper object.
#pragma once

#include <cstddef>
#include <cstdlib>
#include <dnnl.hpp>
#include <memory>
#include <vector>

namespace fulcrum::ops::onednn {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

inline dnnl::engine& Engine() {
  static dnnl::engine* engine = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *engine;
}

// A primitive with its argument array, run without building a map (no allocation).
struct Prim {
  dnnl::primitive prim;
  std::vector<dnnl_exec_arg_t> args;

  void Arg(int kind, const memory& m) { args.push_back({kind, m.get()}); }
  bool Run(const dnnl::stream& stream) const {
    return dnnl_primitive_execute(prim.get(), stream.get(), static_cast<int>(args.size()),
                                  args.data()) == dnnl_success &&
           dnnl_stream_wait(stream.get()) == dnnl_success;
  }
};

// A 64-byte aligned buffer of `bytes`.
struct Buffer {
  void* data = nullptr;
  explicit Buffer(size_t bytes) {
    if (bytes > 0) data = std::aligned_alloc(64, (bytes + 63) / 64 * 64);
  }
  ~Buffer() { std::free(data); }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};

// Primitive attributes with a caller-owned scratchpad (and the given post-ops).
inline dnnl::primitive_attr UserScratchpad(const dnnl::post_ops& post_ops = dnnl::post_ops()) {
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  attr.set_post_ops(post_ops);
  return attr;
}

// A memory object whose handle is set per call.
inline memory Unbound(const memory::desc& md) { return memory(md, Engine(), DNNL_MEMORY_NONE); }

// A primitive's own scratchpad buffer and memory, bound as its DNNL_ARG_SCRATCHPAD argument.
struct Scratch {
  std::unique_ptr<Buffer> buffer;
  memory mem;
  void Bind(Prim* p, const memory::desc& md) {
    if (md.get_size() == 0) return;
    buffer = std::make_unique<Buffer>(md.get_size());
    mem = memory(md, Engine(), buffer->data);
    p->Arg(DNNL_ARG_SCRATCHPAD, mem);
  }
};

// Memory in `md` on a buffer of its own.
struct Owned {
  std::unique_ptr<Buffer> buffer;
  memory mem;
  explicit Owned(const memory::desc& md)
      : buffer(std::make_unique<Buffer>(md.get_size())), mem(md, Engine(), buffer->data) {}
  Owned() = default;
};

}  // namespace fulcrum::ops::onednn
