#include "runtime/descriptor_memo.hpp"

#include <cstring>
#include <mutex>
#include <type_traits>
#include <utility>
#include <vector>

#include <xxhash.h>

namespace convjit::runtime {
namespace {

// Appends fixed-width values to a buffer sized up front, so building a key costs no allocation
// once the caller's buffer has grown to fit (compile() keeps one per thread).
class KeyWriter {
 public:
  explicit KeyWriter(char* at) : at_(at) {}

  template <typename T>
  void put(T value) {
    static_assert(std::is_trivially_copyable_v<T>);
    std::memcpy(at_, &value, sizeof value);
    at_ += sizeof value;
  }
  // Length first: [1,2] then [3] must not read the same as [1] then [2,3].
  void put_list(const std::vector<std::int64_t>& values) {
    put(static_cast<std::uint64_t>(values.size()));
    put_bytes(values.data(), values.size() * sizeof(std::int64_t));
  }
  void put_text(std::string_view text) {
    put(static_cast<std::uint64_t>(text.size()));
    put_bytes(text.data(), text.size());
  }

  static std::size_t list_size(const std::vector<std::int64_t>& values) {
    return sizeof(std::uint64_t) + values.size() * sizeof(std::int64_t);
  }

 private:
  void put_bytes(const void* data, std::size_t size) {
    if (size > 0) std::memcpy(at_, data, size);
    at_ += size;
  }
  char* at_;
};

}  // namespace

void make_descriptor_key(const OpDescriptor& desc, const CompileOptions& options,
                         int num_threads, cpu::Isa isa_cap, std::string* out) {
  const std::string_view backend = options.backend;
  const std::string_view device = options.device;
  // Naming every member in one structured binding makes a field added to OpDescriptor a compile
  // error here until it is part of the key: a field left out would let two different
  // descriptors share a kernel.
  const auto& [op, dtype, data_format, input, filter, out_backprop, sizes_rank, strides, dilations,
               padding, explicit_paddings, use_cudnn_on_gpu] = desc;

  constexpr std::size_t kScalars = 4 * sizeof(std::uint8_t) + 3 * sizeof(std::int32_t) +
                                   3 * sizeof(std::uint8_t) + 2 * sizeof(std::uint64_t);
  const std::size_t size = kScalars + KeyWriter::list_size(input) + KeyWriter::list_size(filter) +
                           KeyWriter::list_size(out_backprop) + KeyWriter::list_size(strides) +
                           KeyWriter::list_size(dilations) +
                           KeyWriter::list_size(explicit_paddings) + backend.size() +
                           device.size();
  out->resize(size);
  KeyWriter w(out->data());
  w.put(static_cast<std::uint8_t>(op));
  w.put(static_cast<std::uint8_t>(dtype));
  w.put(static_cast<std::uint8_t>(data_format));
  w.put(static_cast<std::uint8_t>(padding));
  w.put(static_cast<std::int32_t>(sizes_rank));
  w.put(static_cast<std::int32_t>(num_threads));
  w.put(static_cast<std::int32_t>(isa_cap));
  w.put(static_cast<std::uint8_t>(use_cudnn_on_gpu ? 1 : 0));
  w.put(static_cast<std::uint8_t>(options.math_mode));
  w.put(static_cast<std::uint8_t>(options.deterministic ? 1 : 0));
  w.put_list(input);
  w.put_list(filter);
  w.put_list(out_backprop);
  w.put_list(strides);
  w.put_list(dilations);
  w.put_list(explicit_paddings);
  w.put_text(backend);
  w.put_text(device);
}

std::uint64_t DescriptorMemo::default_hash(std::string_view key) {
  return XXH3_64bits(key.data(), key.size());
}

DescriptorMemo::DescriptorMemo(HashFn hash) : hash_(hash) {}

DescriptorMemo::Kernel DescriptorMemo::find(std::string_view key, std::uint64_t epoch) const {
  const std::uint64_t hash = hash_(key);
  const Shard& shard = shard_of(hash);
  {
    std::shared_lock lock(shard.mutex);
    auto [first, last] = shard.map.equal_range(hash);
    for (auto it = first; it != last; ++it) {
      // Equal hashes are not proof: compare the whole key.
      if (it->second.key == key) {
        if (it->second.epoch == epoch) return it->second.kernel;
        break;
      }
    }
  }
  misses_.fetch_add(1, std::memory_order_relaxed);
  return nullptr;
}

void DescriptorMemo::remember(std::string_view key, Kernel kernel, std::uint64_t seen,
                              std::uint64_t now, std::size_t limit) {
  // Entries of older epochs can never be used again; they only hold kernels the cache let go.
  if (clean_epoch_.load(std::memory_order_acquire) < now) drop_stale(now);
  if (limit == 0 || kernel == nullptr || seen != now) return;

  const std::uint64_t hash = hash_(key);
  Shard& shard = shard_of(hash);
  Kernel displaced;  // released after the lock: it may be the last owner of the code
  std::unique_lock lock(shard.mutex);
  auto [first, last] = shard.map.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    if (it->second.key == key) {
      displaced = std::exchange(it->second.kernel, std::move(kernel));
      it->second.epoch = now;
      return;
    }
  }
  // Several shards may pass this check at once, so the bound holds to within kShards entries.
  if (size_.load(std::memory_order_relaxed) >= limit) {
    if (shard.map.empty()) return;
    displaced = std::move(shard.map.begin()->second.kernel);
    shard.map.erase(shard.map.begin());
    size_.fetch_sub(1, std::memory_order_relaxed);
  }
  shard.map.emplace(hash, Node{std::string(key), std::move(kernel), now});
  size_.fetch_add(1, std::memory_order_relaxed);
}

void DescriptorMemo::drop_stale(std::uint64_t epoch) {
  std::vector<Kernel> dropped;  // released after the locks
  for (Shard& shard : shards_) {
    std::unique_lock lock(shard.mutex);
    for (auto it = shard.map.begin(); it != shard.map.end();) {
      // Epochs only grow: an entry newer than `epoch` came from a concurrent remember().
      if (it->second.epoch < epoch) {
        dropped.push_back(std::move(it->second.kernel));
        it = shard.map.erase(it);
        size_.fetch_sub(1, std::memory_order_relaxed);
      } else {
        ++it;
      }
    }
  }
  std::uint64_t clean = clean_epoch_.load(std::memory_order_relaxed);
  while (clean < epoch &&
         !clean_epoch_.compare_exchange_weak(clean, epoch, std::memory_order_acq_rel)) {
  }
}

void DescriptorMemo::forget_older_than(std::uint64_t epoch) {
  if (clean_epoch_.load(std::memory_order_acquire) < epoch) drop_stale(epoch);
}

void DescriptorMemo::clear() {
  std::vector<Kernel> dropped;
  for (Shard& shard : shards_) {
    std::unique_lock lock(shard.mutex);
    for (auto& [hash, node] : shard.map) dropped.push_back(std::move(node.kernel));
    size_.fetch_sub(shard.map.size(), std::memory_order_relaxed);
    shard.map.clear();
  }
}

DescriptorMemo::Stats DescriptorMemo::stats() const {
  Stats s;
  s.misses = misses_.load(std::memory_order_relaxed);
  s.size = size_.load(std::memory_order_relaxed);
  return s;
}

DescriptorMemo& global_descriptor_memo() {
  // Leaked on purpose, like the kernel cache: its kernels must outlive every static that may
  // still run one.
  static DescriptorMemo* memo = new DescriptorMemo();
  return *memo;
}

}  // namespace convjit::runtime
