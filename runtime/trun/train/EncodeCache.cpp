#include "runtime/trun/train/EncodeCache.h"

#include "runtime/trun/io/FileChecksum.h"
#include "runtime/trun/step/StepEntries.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

namespace tcc::trun {
namespace {

// Version 2: the entries are followed by their CRC-32 (as 8 bytes), so
// changed values (zeroed, garbage, swapped between samples) are caught.
constexpr char kMagic[8] = {'T', 'C', 'C', 'E', 'N', 'C', '2', '\0'};

// The checksum of one entry as the file holds it (sample id, then values),
// continuing `crc`: what Finish writes after the entries and Load checks.
uint32_t EntryCrc(int64_t sample, const char *values, int64_t bytes, uint32_t crc) {
  crc = Crc32(absl::string_view(reinterpret_cast<const char *>(&sample), 8), crc);
  return Crc32(absl::string_view(values, static_cast<size_t>(bytes)), crc);
}

// FNV-1a, 64 bits: the fingerprint of what the cached values depend on.
struct Fnv {
  uint64_t h = 1469598103934665603ull;
  void add(const void *p, size_t n) {
    for (size_t i = 0; i < n; ++i) {
      h ^= static_cast<const unsigned char *>(p)[i];
      h *= 1099511628211ull;
    }
  }
  void add(const std::string &s) { add(s.data(), s.size() + 1); }
  void add(int64_t v) { add(&v, sizeof v); }
};

void AddTensors(Fnv &f, int32_t n, const tcc_tensor_desc *t) {
  for (int32_t i = 0; i < n; ++i) {
    f.add(std::string(t[i].name));
    f.add(static_cast<int64_t>(t[i].dtype));
    for (int32_t k = 0; k < t[i].rank; ++k)
      f.add(t[i].shape[k]);
  }
}

} // namespace

absl::StatusOr<std::unique_ptr<EncodeCache>>
EncodeCache::Create(const tcc_step_descriptor &d, const StepBinding &binding, Trainer &trainer,
                    const EncodeCacheOptions &options, std::ostream &out) {
  const tcc_step_entry *encode = FindEntry(d, "encode");
  const tcc_step_entry *cached = FindEntry(d, "train_cached");
  if (!encode || !cached)
    return std::unique_ptr<EncodeCache>();
  std::unique_ptr<EncodeCache> c(new EncodeCache(d));
  c->device_ = d.device;
  c->encode_ = encode;
  c->train_cached_ = cached;
  c->batch_ = binding.batch_size;
  c->limit_bytes_ = options.limit_bytes;
  c->out_ = &out;
  std::string where = absl::StrCat("step '", d.model_name, "': encode cache: ");
  auto descriptorInput = [&](const char *name) {
    for (int32_t i = 0; i < d.num_inputs; ++i)
      if (std::strcmp(d.inputs[i].name, name) == 0)
        return i;
    return -1;
  };
  std::vector<int64_t> cut_sizes;
  for (int32_t k = 0; k < encode->num_outputs; ++k) {
    const tcc_tensor_desc &t = encode->outputs[k];
    if (c->batch_ <= 0 || t.rank < 1 || t.shape[0] % c->batch_ != 0)
      return absl::FailedPreconditionError(
          absl::StrCat(where, "output '", t.name, "' is not batched like the inputs"));
    c->row_offset_.push_back(c->sample_bytes_);
    c->row_bytes_.push_back(t.size_bytes / c->batch_);
    c->sample_bytes_ += t.size_bytes / c->batch_;
    cut_sizes.push_back(t.size_bytes);
  }
  for (int32_t i = 0; i < encode->num_inputs; ++i) {
    int32_t in = descriptorInput(encode->inputs[i].name);
    if (in < 0)
      return absl::FailedPreconditionError(
          absl::StrCat(where, "encode input '", encode->inputs[i].name, "' is not a step input"));
    c->encode_from_.push_back(in);
  }
  for (int32_t i = 0; i < cached->num_inputs; ++i) {
    int32_t from = descriptorInput(cached->inputs[i].name);
    bool found = from >= 0;
    for (int32_t k = 0; k < encode->num_outputs && !found; ++k)
      if (std::strcmp(encode->outputs[k].name, cached->inputs[i].name) == 0) {
        from = -1 - k;
        found = true;
      }
    if (!found)
      return absl::FailedPreconditionError(absl::StrCat(
          where, "train_cached input '", cached->inputs[i].name,
          "' is neither an encode output nor a step input"));
    c->train_from_.push_back(from);
  }
  if (c->device_) {
    auto arena = DeviceArena::Create(*c->device_, "the encode cache's batch", cut_sizes);
    if (!arena.ok())
      return arena.status();
    c->device_cut_ = std::move(*arena);
  }
  for (size_t k = 0; k < cut_sizes.size(); ++k) {
    c->host_cut_.emplace_back(static_cast<size_t>(cut_sizes[k]));
    c->cut_ptrs_.push_back(c->device_ ? c->device_cut_->tensor(k) : c->host_cut_[k].data());
  }

  // The fingerprint: the encode signature, the frozen parameters' bytes
  // and the data files.
  Fnv f;
  f.add(std::string(d.model_name));
  AddTensors(f, encode->num_inputs, encode->inputs);
  AddTensors(f, encode->num_outputs, encode->outputs);
  if (absl::Status s = trainer.SyncToHost(); !s.ok())
    return s;
  for (int32_t p = 0; p < d.num_params; ++p)
    if (!d.params[p].trainable) {
      f.add(std::string(d.params[p].name));
      f.add(trainer.param(p), d.params[p].size_bytes);
    }
  for (const std::string &path : options.data_files) {
    f.add(path);
    absl::StatusOr<FileChecksum> sum = ChecksumOfFile(path);
    if (sum.ok()) {
      f.add(sum->bytes);
      f.add(static_cast<int64_t>(sum->crc32));
    }
  }
  c->fingerprint_ = f.h;
  if (options.dir) {
    std::error_code ec;
    std::filesystem::create_directories(*options.dir, ec);
    std::string probe = *options.dir + "/.tcc-encode-cache-probe";
    std::FILE *p = ec ? nullptr : std::fopen(probe.c_str(), "wb");
    if (!p)
      return absl::PermissionDeniedError(absl::StrCat(
          "--encode-cache ", *options.dir, ": cannot write there (",
          ec ? ec.message() : std::strerror(errno), ")"));
    std::fclose(p);
    std::filesystem::remove(probe, ec);
    c->file_ = absl::StrFormat("%s/%s-%016x.enc", *options.dir, d.model_name, c->fingerprint_);
    c->Load(out);
  }
  out << absl::StrFormat("encode cache: %d values (%d bytes) per sample from @encode, %s; limit "
                         "%d bytes\n",
                         encode->num_outputs, c->sample_bytes_,
                         c->file_ ? "file " + *c->file_ : std::string("in memory"),
                         c->limit_bytes_);
  return c;
}

void EncodeCache::Load(std::ostream &out) {
  // Other runs' files (other data or weights) have another name: say so.
  std::error_code ec;
  std::string dir = std::filesystem::path(*file_).parent_path().string();
  std::string prefix = std::string(d_.model_name) + "-";
  for (const auto &e : std::filesystem::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.rfind(prefix, 0) == 0 && e.path().extension() == ".enc" && e.path() != *file_)
      out << "encode cache: " << e.path().string()
          << " is from other data or weights: ignored (this run's is rebuilt)\n";
  }
  std::ifstream in(*file_, std::ios::binary);
  if (!in)
    return; // first run: built as training goes
  char magic[8];
  uint64_t fingerprint = 0, sample_bytes = 0, count = 0;
  in.read(magic, 8);
  in.read(reinterpret_cast<char *>(&fingerprint), 8);
  in.read(reinterpret_cast<char *>(&sample_bytes), 8);
  in.read(reinterpret_cast<char *>(&count), 8);
  auto corrupt = [&](const std::string &why) {
    out << "encode cache: " << *file_ << " is corrupt (" << why << "): ignored and rebuilt\n";
    index_.clear();
    store_.clear();
  };
  if (!in || std::memcmp(magic, kMagic, 8) != 0)
    return corrupt("not an encode cache file");
  if (fingerprint != fingerprint_ || sample_bytes != static_cast<uint64_t>(sample_bytes_))
    return corrupt("its header does not match this step");
  uint32_t crc = 0;
  std::string skipped; // values past the limit: read for the checksum only
  for (uint64_t i = 0; i < count; ++i) {
    int64_t sample = -1;
    in.read(reinterpret_cast<char *>(&sample), 8);
    size_t at = store_.size();
    const bool keep = static_cast<int64_t>(at) + sample_bytes_ <= limit_bytes_;
    char *values = nullptr;
    if (keep) {
      store_.resize(at + sample_bytes_);
      values = store_.data() + at;
    } else {
      skipped.resize(static_cast<size_t>(sample_bytes_));
      values = skipped.data();
    }
    in.read(values, sample_bytes_);
    if (!in || sample < 0)
      return corrupt(absl::StrCat("cut short at sample ", i, " of ", count));
    crc = EntryCrc(sample, values, sample_bytes_, crc);
    if (keep)
      index_[sample] = static_cast<int64_t>(at);
  }
  uint64_t stored_crc = 0;
  in.read(reinterpret_cast<char *>(&stored_crc), 8);
  if (!in)
    return corrupt("cut short before its checksum");
  if (stored_crc != crc)
    return corrupt("its values do not match their checksum");
  loaded_ = static_cast<int64_t>(index_.size());
  out << "encode cache: " << loaded_ << " samples loaded from " << *file_ << "\n";
}

void EncodeCache::Attach(Trainer &trainer) {
  trainer.set_train_hook(
      [this](HostBatch &batch, const tcc_step_args &args) { return Train(batch, args); });
}

int32_t EncodeCache::Train(HostBatch &batch, const tcc_step_args &args) {
  const int64_t rows = static_cast<int64_t>(batch.samples.size());
  bool hit = rows == batch_;
  for (int64_t r = 0; r < rows && hit; ++r)
    hit = index_.count(batch.samples[r]) > 0;
  if (hit) {
    for (size_t k = 0; k < row_bytes_.size(); ++k) {
      char *dst = static_cast<char *>(host_cut_[k].data());
      for (int64_t r = 0; r < rows; ++r)
        std::memcpy(dst + r * row_bytes_[k],
                    store_.data() + index_[batch.samples[r]] + row_offset_[k], row_bytes_[k]);
      if (device_)
        if (int32_t rc = device_->to_device(cut_ptrs_[k], dst, host_cut_[k].size()))
          return rc;
    }
    hits_ += rows;
    ++hit_batches_;
  } else {
    std::vector<const void *> inputs;
    for (int32_t from : encode_from_)
      inputs.push_back(args.inputs[from]);
    tcc_step_args e = args;
    float loss = 0;
    e.inputs = inputs.data();
    e.outputs = cut_ptrs_.data();
    e.loss = &loss;
    auto start = std::chrono::steady_clock::now();
    if (int32_t rc = encode_->fn(&e))
      return rc;
    for (size_t k = 0; k < row_bytes_.size() && device_; ++k)
      if (int32_t rc = device_->to_host(host_cut_[k].data(), cut_ptrs_[k], host_cut_[k].size()))
        return rc;
    encode_seconds_ +=
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    ++encode_batches_;
    misses_ += batch_;
    for (int64_t r = 0; r < rows; ++r) {
      if (index_.count(batch.samples[r]))
        continue;
      int64_t at = static_cast<int64_t>(store_.size());
      if (at + sample_bytes_ > limit_bytes_) {
        if (!full_said_ && out_)
          *out_ << absl::StrFormat("encode cache: the limit of %d bytes is reached after %d "
                                   "samples: the others are encoded every time\n",
                                   limit_bytes_, index_.size());
        full_said_ = true;
        break;
      }
      store_.resize(at + sample_bytes_);
      for (size_t k = 0; k < row_bytes_.size(); ++k)
        std::memcpy(store_.data() + at + row_offset_[k],
                    static_cast<const char *>(host_cut_[k].data()) + r * row_bytes_[k],
                    row_bytes_[k]);
      index_[batch.samples[r]] = at;
    }
  }
  std::vector<const void *> inputs;
  for (int32_t from : train_from_)
    inputs.push_back(from < 0 ? cut_ptrs_[-1 - from] : args.inputs[from]);
  tcc_step_args t = args;
  t.inputs = inputs.data();
  return train_cached_->fn(&t);
}

absl::Status EncodeCache::Finish(std::ostream &out) {
  double per_batch = encode_batches_ ? encode_seconds_ / encode_batches_ : 0;
  out << absl::StrFormat("encode cache: %d hits, %d misses (samples); encode %.3f s over %d "
                         "batches (%.2f ms each); about %.3f s saved by %d cached batches\n",
                         hits_, misses_, encode_seconds_, encode_batches_, per_batch * 1e3,
                         per_batch * hit_batches_, hit_batches_);
  if (!file_ || static_cast<int64_t>(index_.size()) == loaded_)
    return absl::OkStatus();
  std::string tmp = *file_ + ".tmp";
  std::ofstream o(tmp, std::ios::binary | std::ios::trunc);
  uint64_t header[3] = {fingerprint_, static_cast<uint64_t>(sample_bytes_), index_.size()};
  o.write(kMagic, 8);
  o.write(reinterpret_cast<const char *>(header), sizeof header);
  uint32_t crc = 0;
  for (const auto &[sample, at] : index_) {
    o.write(reinterpret_cast<const char *>(&sample), 8);
    o.write(store_.data() + at, sample_bytes_);
    crc = EntryCrc(sample, store_.data() + at, sample_bytes_, crc);
  }
  uint64_t trailer = crc;
  o.write(reinterpret_cast<const char *>(&trailer), 8);
  o.close();
  std::error_code ec;
  if (!o || (std::filesystem::rename(tmp, *file_, ec), ec)) {
    std::filesystem::remove(tmp, ec); // no temporary left behind
    return absl::InternalError(absl::StrCat("--encode-cache: cannot write ", *file_));
  }
  out << "encode cache: " << index_.size() << " samples written to " << *file_ << "\n";
  return absl::OkStatus();
}

} // namespace tcc::trun
