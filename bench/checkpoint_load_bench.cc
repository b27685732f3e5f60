// Time-to-SERVING of a Llama-3-sized F32 head (128256 x 4096 = 2.1 GB
// safetensors, tied) next to the time of reading the same file, in the
// same run. The checkpoint is generated in a temp dir (default /tmp), never
// in the repository, and removed at the end.
//
//   bench/checkpoint_load_bench [--dir /tmp] [--vocab 128256] [--hidden 4096] [--keep]
//
// Printed:
//   write      time to generate the file (not part of the comparison)
//   read(2)    read the whole file into memory (page cache warm: just written)
//   serving    Model::Create with sha256 in the background: mmap + header
//              validation + oneDNN head primitive -> the model answers calls
//   head copy  when the background huge-page copy of the head is done
//              (Model::Options::head_huge_pages; VOCABD_HEAD_HUGE_PAGES=0: none)
//   sha256     when the background sha256 of the 2.1 GB file is done
//   ratio      serving / read(2)  (target: serving <= 0.5 s)
//   first call one ComputeLogits row right after serving (touches the pages)
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "lib/serving/model.h"

namespace {

using Clock = std::chrono::steady_clock;
double Seconds(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void WriteCheckpoint(const std::string& dir, int64_t vocab, int64_t hidden) {
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/config.json")
      << "{\"model_type\": \"llama\", \"vocab_size\": " << vocab << ", \"hidden_size\": " << hidden
      << ", \"num_hidden_layers\": 32, \"num_attention_heads\": 32, \"num_key_value_heads\": 8,"
         " \"intermediate_size\": 14336, \"max_position_embeddings\": 8192,"
         " \"rms_norm_eps\": 1e-5, \"rope_theta\": 500000.0, \"tie_word_embeddings\": true}";
  const uint64_t embed_bytes = static_cast<uint64_t>(vocab * hidden * 4);
  const uint64_t norm_bytes = static_cast<uint64_t>(hidden * 4);
  std::string header = "{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[" +
                       std::to_string(vocab) + "," + std::to_string(hidden) +
                       "],\"data_offsets\":[0," + std::to_string(embed_bytes) +
                       "]},\"model.norm.weight\":{\"dtype\":\"F32\",\"shape\":[" +
                       std::to_string(hidden) + "],\"data_offsets\":[" +
                       std::to_string(embed_bytes) + "," +
                       std::to_string(embed_bytes + norm_bytes) + "]}}";
  while ((8 + header.size()) % 64 != 0) header.push_back(' ');
  std::ofstream out(dir + "/model.safetensors", std::ios::binary);
  const uint64_t n = header.size();
  out.write(reinterpret_cast<const char*>(&n), 8);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<float> row(static_cast<size_t>(hidden));
  for (int64_t r = 0; r < vocab; ++r) {
    for (int64_t j = 0; j < hidden; ++j) row[j] = std::sin(0.001f * (r * 7 + j));
    out.write(reinterpret_cast<const char*>(row.data()), static_cast<std::streamsize>(hidden * 4));
  }
  std::vector<float> ones(static_cast<size_t>(hidden), 1.0f);
  out.write(reinterpret_cast<const char*>(ones.data()), static_cast<std::streamsize>(hidden * 4));
}

double ReadWholeFile(const std::string& path) {
  const auto t0 = Clock::now();
  const int fd = ::open(path.c_str(), O_RDONLY);
  std::vector<char> buffer(std::filesystem::file_size(path));
  size_t done = 0;
  while (done < buffer.size()) {
    const ssize_t n = ::read(fd, buffer.data() + done, buffer.size() - done);
    if (n <= 0) break;
    done += static_cast<size_t>(n);
  }
  ::close(fd);
  return Seconds(t0, Clock::now());
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Time-to-SERVING of a 2.1 GB F32 safetensors head vs reading the file"};
  std::string base = "/tmp";
  int64_t vocab = 128256, hidden = 4096;
  bool keep = false;
  app.add_option("--dir", base, "Where the temporary checkpoint is written");
  app.add_option("--vocab", vocab);
  app.add_option("--hidden", hidden);
  app.add_flag("--keep", keep, "Keep the generated checkpoint");
  CLI11_PARSE(app, argc, argv);
  const std::string dir = base + "/vocabd_bench_head_" + std::to_string(::getpid());

  auto t0 = Clock::now();
  WriteCheckpoint(dir, vocab, hidden);
  const double write_s = Seconds(t0, Clock::now());
  const double file_gb = std::filesystem::file_size(dir + "/model.safetensors") / 1e9;
  const double read_s = ReadWholeFile(dir + "/model.safetensors");

  vocabd::Model::Options options;
  options.name = "bench";
  options.path = dir;
  options.sha256_in_background = true;
  options.weights_dtype = vocabd::WeightsDType::kF32;
  t0 = Clock::now();
  auto model = vocabd::Model::Create(options);
  const double serving_s = Seconds(t0, Clock::now());
  if (!model.ok()) {
    std::fprintf(stderr, "load failed: %s\n", std::string(model.status().message()).c_str());
    return 1;
  }
  std::vector<float> hidden_row(static_cast<size_t>(hidden), 0.01f), logits;
  vocabd::HeadInput in;
  in.hidden = hidden_row.data();
  in.rows = 1;
  in.width = hidden;
  auto t1 = Clock::now();
  const bool call_ok = (*model)->ComputeLogits(in, false, &logits).ok();
  const double first_call_s = Seconds(t1, Clock::now());
  const std::string head_memory = (*model)->WaitForHeadCopy();
  const double copy_s = Seconds(t0, Clock::now());
  (*model)->checkpoint().WaitForSha256(std::chrono::minutes(10));
  const double sha_s = Seconds(t0, Clock::now());
  const auto files = (*model)->checkpoint().SourceFilesSnapshot();
  bool mapped = false;
  for (const auto& f : files) mapped = mapped || f.memory_mapped;

  std::printf("checkpoint   %lld x %lld F32 safetensors, %.2f GB, in %s\n",
              static_cast<long long>(vocab), static_cast<long long>(hidden), file_gb, dir.c_str());
  std::printf("write        %8.3f s (generation, not compared)\n", write_s);
  std::printf("read(2)      %8.3f s (%.2f GB/s, page cache as the write left it)\n", read_s, file_gb / read_s);
  std::printf("serving      %8.3f s (mmap=%s, resident_bytes=%lld)  target <= 0.5 s: %s\n",
              serving_s, mapped ? "yes" : "no",
              static_cast<long long>((*model)->checkpoint().resident_bytes()),
              serving_s <= 0.5 ? "MET" : "MISSED");
  std::printf("ratio        serving / read(2) = %.3f\n", serving_s / read_s);
  std::printf("first call   %8.3f s (1 row ComputeLogits, pages touched: %s)\n", first_call_s,
              call_ok ? "ok" : "FAILED");
  std::printf("head copy    %8.3f s after the start of the load (background; the head reads: %s)\n",
              copy_s, head_memory.c_str());
  std::printf("sha256       %8.3f s after the start of the load (background; GetModel shows "
              "sha256_pending until then)\n",
              sha_s);
  model->reset();
  if (!keep) std::filesystem::remove_all(dir);
  return 0;
}
