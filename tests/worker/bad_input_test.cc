// Bad input through the real worker binary: every case exits with code 2, names the thing
// that is wrong, and leaves an existing run directory's files untouched.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gtest/gtest.h"
#include "tests/testing/subprocess.h"

namespace fulcrum {
namespace {

namespace fs = std::filesystem;

using ::fulcrum::testing::FreshDir;
using ::fulcrum::testing::RunBinary;
using ::fulcrum::testing::RunResult;

void WriteBigEndian(std::ofstream& out, uint32_t v) {
  const unsigned char b[4] = {static_cast<unsigned char>(v >> 24),
                              static_cast<unsigned char>(v >> 16),
                              static_cast<unsigned char>(v >> 8), static_cast<unsigned char>(v)};
  out.write(reinterpret_cast<const char*>(b), 4);
}

// An IDX images file with the given magic and count whose pixel data holds `pixel_bytes`.
void WriteImages(const fs::path& path, uint32_t magic, uint32_t count, size_t pixel_bytes) {
  std::ofstream out(path, std::ios::binary);
  WriteBigEndian(out, magic);
  WriteBigEndian(out, count);
  WriteBigEndian(out, 28);
  WriteBigEndian(out, 28);
  const std::string pixels(pixel_bytes, '\x10');
  out.write(pixels.data(), static_cast<std::streamsize>(pixels.size()));
}

void WriteLabels(const fs::path& path, uint32_t count) {
  std::ofstream out(path, std::ios::binary);
  WriteBigEndian(out, 2049);
  WriteBigEndian(out, count);
  const std::string labels(count, '\x03');
  out.write(labels.data(), static_cast<std::streamsize>(labels.size()));
}

std::string ReadFile(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A run directory holding results of an earlier run that must survive a failed run. The runs
// given it pass --overwrite, so that the bad input itself is reached (without it the worker
// refuses the folder first): even told to replace them, a run that fails keeps them.
fs::path RunDirWithOldSummary(const std::string& name) {
  fs::path dir = FreshDir("bad_" + name + "_run");
  std::ofstream(dir / "summary.json") << "{\"earlier\": true}\n";
  return dir;
}

void ExpectBadInput(const RunResult& r, const std::vector<std::string>& needles) {
  EXPECT_EQ(r.exit_code, 2) << r.output;
  for (const auto& needle : needles) {
    EXPECT_NE(r.output.find(needle), std::string::npos) << "missing '" << needle << "' in\n"
                                                        << r.output;
  }
}

TEST(BadInputTest, MissingDataDirectory) {
  const fs::path run_dir = RunDirWithOldSummary("missing");
  const std::string data_dir = "/nonexistent/fulcrum-data";
  RunResult r = RunBinary("worker", {"--data_dir=" + data_dir, "--train_steps=5",
                                     "--run_dir=" + run_dir.string(), "--overwrite"});
  ExpectBadInput(r, {data_dir + "/train-", "not found"});
  EXPECT_EQ(ReadFile(run_dir / "summary.json"), "{\"earlier\": true}\n");
}

TEST(BadInputTest, TruncatedImagesFile) {
  const fs::path data = FreshDir("bad_truncated");
  WriteImages(data / "train-images-idx3-ubyte", 2051, 10, 1000);  // promises 7840 bytes
  WriteLabels(data / "train-labels-idx1-ubyte", 10);
  const fs::path run_dir = RunDirWithOldSummary("truncated");
  RunResult r = RunBinary("worker", {"--data_dir=" + data.string(), "--train_steps=5",
                                     "--run_dir=" + run_dir.string(), "--overwrite"});
  ExpectBadInput(r, {(data / "train-images-idx3-ubyte").string(), "truncated"});
  EXPECT_EQ(ReadFile(run_dir / "summary.json"), "{\"earlier\": true}\n");
}

TEST(BadInputTest, WrongMagicNumber) {
  const fs::path data = FreshDir("bad_magic");
  WriteImages(data / "train-images-idx3-ubyte", 1234, 10, 7840);
  WriteLabels(data / "train-labels-idx1-ubyte", 10);
  RunResult r = RunBinary("worker", {"--data_dir=" + data.string(), "--train_steps=5",
                                     "--run_dir=" + FreshDir("bad_magic_run").string()});
  ExpectBadInput(r, {(data / "train-images-idx3-ubyte").string(), "magic", "1234"});
}

// /proc/meminfo's MemAvailable in GiB (0 when unreadable).
double AvailableGiB() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  double kib = 0;
  while (in >> key) {
    if (key == "MemAvailable:") {
      in >> kib;
      break;
    }
  }
  return kib / (1024.0 * 1024.0);
}

TEST(BadInputTest, BadFlags) {
  const std::string run = "--run_dir=" + FreshDir("bad_flags").string();
  ExpectBadInput(RunBinary("worker", {"--batch_size=abc", run}), {"batch_size", "abc"});
  ExpectBadInput(RunBinary("worker", {"--batch_size=0", "--train_steps=1", run}),
                 {"--batch_size=0"});
  ExpectBadInput(RunBinary("worker", {"--no_such_flag=1", run}), {"unknown flag --no_such_flag"});
  ExpectBadInput(RunBinary("worker", {"--optimizer=rmsprob", "--train_steps=1", run}), {"rmsprob"});
  ExpectBadInput(RunBinary("worker", {"--train_steps=10", "--epochs=1", run}),
                 {"--train_steps", "--epochs"});
  ExpectBadInput(RunBinary("worker", {"--dataset=imagenet", "--train_steps=1", run}), {"imagenet"});
  ExpectBadInput(RunBinary("worker", {"--model=resnet", "--train_steps=1", run}),
                 {"resnet", "mlp"});
  // --tf32 is a GPU setting (issue 28): refused on CPU devices, naming both flags.
  ExpectBadInput(RunBinary("worker", {"--tf32=on", "--train_steps=1", run}),
                 {"--tf32=on needs a GPU device", "--device=cpu"});
  ExpectBadInput(
      RunBinary("worker", {"--tf32=on", "--devices=cpu:0,arena", "--train_steps=1", run}),
      {"--tf32=on", "--devices=cpu:0,arena"});
  ExpectBadInput(RunBinary("worker", {"--tf32=yes", "--train_steps=1", run}),
                 {"--tf32=yes: expected on or off"});
  // A model that does not fit its device's free memory (the arena's: the host's available
  // memory; 60000 24x24x3 images in one batch need ~35 GiB of activations) is refused before
  // the run directory is made, naming the flag, the device and both sizes.
  const std::filesystem::path big = FreshDir("bad_flags_big") / "run";
  if (AvailableGiB() < 30)
    ExpectBadInput(
        RunBinary("worker",
                  {"--model=cifar10_cnn", "--dataset=synthetic", "--synthetic_shape=24,24,3",
                   "--synthetic_examples=60000", "--batch_size=60000", "--train_steps=1",
                   "--device=arena", "--run_dir=" + big.string()}),
        {"--device: cifar10_cnn at batch 60000 needs", "GiB", "on arena", "are free there"});
  EXPECT_FALSE(std::filesystem::exists(big));
  // ps and chief accept the same flag set and refuse bad flags the same way.
  ExpectBadInput(RunBinary("ps", {"--batch_size=abc"}), {"batch_size"});
  ExpectBadInput(RunBinary("chief", {"--no_such_flag"}), {"no_such_flag"});
}

// More ps tasks than the placement can fill (logreg has 2 variables): the chief refuses the
// run before any task waits on it, naming the empty ps and what would help.
TEST(BadInputTest, MorePsTasksThanThePlacementCanFill) {
  const std::filesystem::path dir = FreshDir("chief_empty_ps");
  std::ofstream(dir / "spec.json")
      << "{\"chief\": [\"127.0.0.1:1\"], \"ps\": [\"127.0.0.1:2\", \"127.0.0.1:3\", "
         "\"127.0.0.1:4\"], \"worker\": [\"127.0.0.1:5\"]}\n";
  const std::string spec = "--cluster_spec=" + (dir / "spec.json").string();
  ExpectBadInput(RunBinary("chief", {spec, "--model=logreg", "--train_steps=10"}),
                 {"--placement=round_robin leaves ps:2 without a variable", "fewer ps tasks"});
  // The what-if's host flags: a malformed rate or CPU share is refused up front, by any task.
  ExpectBadInput(RunBinary("chief", {spec, "--train_steps=10", "--link_rate=fast"}),
                 {"--link_rate=fast", "1gbit"});
  ExpectBadInput(RunBinary("worker", {spec, "--train_steps=10", "--job_name=worker",
                                      "--task_index=0", "--host_cpus=-1"}),
                 {"--host_cpus=-1", "[0, 4096]"});
}

// A convolutional model whose layers do not fit the data: exit 2 naming the model and the
// layer; the run directory's earlier summary stays.
TEST(BadInputTest, ModelThatDoesNotFitTheImages) {
  struct Case {
    std::string name;
    std::vector<std::string> flags;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      // Fashion-MNIST is 28x28: too small for AlexNet's stride-4 11x11 VALID conv and pools.
      {"alexnet", {"--model=alexnet"}, {"alexnet", "67x67", "28x28x1"}},
      // 3x3 images: mnist_cnn's second 2x2 VALID pool gets a 1x1 input.
      {"tiny",
       {"--model=mnist_cnn", "--dataset=synthetic", "--synthetic_shape=3,3,1",
        "--synthetic_examples=64"},
       {"mnist_cnn: pool2", "larger than the input"}},
      // Flat examples are not images.
      {"flat",
       {"--model=cifar10_cnn", "--dataset=synthetic", "--synthetic_shape=784",
        "--synthetic_examples=64"},
       {"cifar10_cnn", "needs images"}},
  };
  for (const Case& c : cases) {
    const fs::path run_dir = RunDirWithOldSummary("cnn_shape_" + c.name);
    std::vector<std::string> flags = c.flags;
    flags.push_back("--train_steps=5");
    flags.push_back("--run_dir=" + run_dir.string());
    flags.push_back("--overwrite");
    ExpectBadInput(RunBinary("worker", flags), c.needles);
    EXPECT_EQ(ReadFile(run_dir / "summary.json"), "{\"earlier\": true}\n") << c.name;
  }
}

// The new optimizer and model flags name themselves when out of range.
TEST(BadInputTest, OptimizerAndModelFlagsOutOfRange) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--rmsprop_decay=1.5", "--rmsprop_decay=1.5: must be in [0, 1)"},
      {"--learning_rate_decay_rate=0", "--learning_rate_decay_rate=0: must be in (0, 1]"},
      {"--learning_rate_decay_steps=-3", "--learning_rate_decay_steps=-3"},
      {"--weight_decay=heavy", "--weight_decay=heavy: expected 'model' or a non-negative number"},
      {"--input_pipeline=imagenet", "--input_pipeline=imagenet: expected plain or cifar10"},
      {"--device=tpu:0", "--device=tpu:0: expected cpu, cpu:N or gpu:N"},
      {"--devices=cpu:0,cpu:0", "cpu:0 is named twice"},
      {"--device=gpu:255", "--device: gpu:255"},  // past the last GPU of any machine
      {"--devices=cpu:0,gpu:255", "--devices: gpu:255"},
  };
  for (const auto& [flag, message] : cases) {
    RunResult r = RunBinary("worker", {flag, "--train_steps=5"});
    ExpectBadInput(r, {message});
  }
  ExpectBadInput(
      RunBinary("worker", {"--devices=cpu:0,cpu:1,cpu:2", "--batch_size=2", "--train_steps=5"}),
      {"--batch_size=2 is smaller than the 3 devices of --devices"});
}

// Absurd sizes (issue 12: each of these aborted with std::bad_alloc, trained one step and
// overwrote the summary, or was taken as another value) are refused with exit 2, naming the
// flag or what it asks for, before anything is allocated and before the run directory is
// touched.
TEST(BadInputTest, AbsurdSizesAreRefusedBeforeAnyAllocation) {
  struct Case {
    std::vector<std::string> flags;
    std::vector<std::string> needles;
  };
  const std::vector<Case> cases = {
      {{"--model=mlp", "--model_width=1e9", "--train_steps=5"},
       {"mlp: variable dense_0/kernel [784, 256000000000] has more than", "elements"}},
      {{"--dataset=synthetic", "--synthetic_shape=100000,100000", "--train_steps=5"},
       {"synthetic: ", "[100000, 100000]", "GiB"}},
      {{"--dataset=synthetic", "--synthetic_examples=1000000000000", "--train_steps=5"},
       {"synthetic: 1000000000000 examples", "GiB"}},
      {{"--epochs=1e15"}, {"--epochs=1e+15: at most 1e+09 passes"}},
      {{"--epochs=1e300"}, {"--epochs=1e+300: at most 1e+09 passes"}},
      {{"--task_index=-7", "--train_steps=5"}, {"--task_index=-7: must not be negative"}},
      {{"--learning_rate=1e30", "--train_steps=5"}, {"--learning_rate=1e+30: at most 1000"}},
  };
  for (const Case& c : cases) {
    const fs::path run_dir = RunDirWithOldSummary("absurd");
    std::vector<std::string> flags = c.flags;
    flags.push_back("--run_dir=" + run_dir.string());
    flags.push_back("--overwrite");
    ExpectBadInput(RunBinary("worker", flags), c.needles);
    EXPECT_EQ(ReadFile(run_dir / "summary.json"), "{\"earlier\": true}\n") << c.flags[0];
  }
}

// The CIFAR-10 input pipeline refuses what it cannot crop, and a CIFAR-10 batch file of the
// wrong length is refused naming the file; exit 2 each time.
TEST(BadInputTest, InputPipelineAndCifarFiles) {
  const std::vector<std::string> base = {"--model=cifar10_cnn", "--dataset=synthetic",
                                         "--synthetic_examples=64", "--input_pipeline=cifar10",
                                         "--train_steps=5"};
  std::vector<std::string> big_crop = base;
  big_crop.push_back("--synthetic_shape=32,32,3");
  big_crop.push_back("--crop_size=40");
  big_crop.push_back("--run_dir=" + FreshDir("bad_crop").string());
  ExpectBadInput(RunBinary("worker", big_crop), {"--crop_size=40", "32x32"});
  std::vector<std::string> flat = base;
  flat.push_back("--synthetic_shape=784");
  flat.push_back("--run_dir=" + FreshDir("bad_crop_flat").string());
  ExpectBadInput(RunBinary("worker", flat), {"--input_pipeline=cifar10", "rank 1"});

  // Five train batches of whole 3073-byte records, except data_batch_3.bin (two records and
  // a bit), and a test batch.
  const fs::path data = FreshDir("bad_cifar");
  const std::string record(3073, '\x01');
  for (int i = 1; i <= 5; ++i) {
    std::ofstream out(data / absl::StrCat("data_batch_", i, ".bin"), std::ios::binary);
    out << record << record;
    if (i == 3) out << std::string(100, '\x01');
  }
  std::ofstream(data / "test_batch.bin", std::ios::binary) << record;
  const fs::path run_dir = RunDirWithOldSummary("cifar_length");
  RunResult r = RunBinary(
      "worker", {"--dataset=cifar10", "--data_dir=" + data.string(), "--model=cifar10_cnn",
                 "--train_steps=5", "--run_dir=" + run_dir.string(), "--overwrite"});
  ExpectBadInput(r, {"data_batch_3.bin", "truncated record"});
  EXPECT_EQ(ReadFile(run_dir / "summary.json"), "{\"earlier\": true}\n");
}

}  // namespace
}  // namespace fulcrum
