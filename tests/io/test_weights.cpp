// save_weights / load_weights and checkpoints: Keras' names and shapes in the
// safetensors format, a file written by Python's safetensors loads, every
// kind of bad file is an Error naming the file and the tensor, and a fit
// resumed from a checkpoint equals an unbroken one bit for bit.
#include <doctest/doctest.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "data/temp_dir.hpp"
#include "lockstep/lockstep.hpp"
#include "train/test_helpers.hpp"

using namespace lockstep;

namespace {
using Model = Sequential<Input<4>, Dense<3>, BatchNormalization<>, Relu, Dense<2>>;
using Other = Sequential<Input<4>, Dense<5>, Dense<2>>;

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}
void write_all(const std::string& path, const std::string& bytes) { testing::write_file(path, bytes); }

// A safetensors file written by Python (safetensors 0.8.0, numpy):
//   save_file({"dense/kernel": np.arange(6, dtype=np.float32).reshape(3, 2),
//              "dense/bias": np.array([0.5, -0.5], dtype=np.float32)}, path)
// for Sequential<Input<3>, Dense<2>>, stored as hex so no binary is committed.
const char* kPythonFileHex =
    "88000000000000007b2264656e73652f62696173223a7b226474797065223a22463332222c227368617065223a5b325d"
    "2c22646174615f6f666673657473223a5b302c385d7d2c2264656e73652f6b65726e656c223a7b226474797065223a22"
    "463332222c227368617065223a5b332c325d2c22646174615f6f666673657473223a5b382c33325d7d7d202020202020"
    "0000003f000000bf000000000000803f0000004000004040000080400000a040";

std::string unhex(const std::string& hex) {
  std::string out;
  for (std::size_t i = 0; i + 1 < hex.size(); i += 2) out.push_back(static_cast<char>(std::stoi(hex.substr(i, 2), nullptr, 16)));
  return out;
}
}  // namespace

TEST_CASE("variables carry Keras' names and shapes") {
  const auto vars = Model::variables();
  REQUIRE(vars.size() == 8);
  CHECK(vars[0].name == "dense/kernel");
  CHECK(vars[0].shape == std::vector<std::int64_t>{4, 3});
  CHECK(vars[1].name == "dense/bias");
  CHECK(vars[2].name == "batch_normalization/gamma");
  CHECK(vars[4].name == "batch_normalization/moving_mean");
  CHECK(!vars[4].trainable);
  CHECK(vars[5].name == "batch_normalization/moving_variance");
  CHECK(vars[6].name == "dense_1/kernel");
  CHECK(vars[6].shape == std::vector<std::int64_t>{3, 2});
  CHECK(vars[7].offset == Model::kOffsets[3] + 6);
}

TEST_CASE("save_weights then load_weights gives the same parameters and state") {
  testing::TempDir dir;
  Model trained{3};
  for (std::size_t i = 0; i < trained.state().size(); ++i) trained.state()[i] = 0.25f * static_cast<float>(i);
  const std::string path = dir.file("model.safetensors");
  save_weights(trained, path);
  Model loaded{99};
  load_weights(loaded, path);
  CHECK(loaded.parameters() == trained.parameters());
  CHECK(loaded.state() == trained.state());
  // The header is JSON with the tensor names, 8-byte aligned data, little-endian length.
  const std::string bytes = read_all(path);
  std::uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  CHECK(length % 8 == 0);
  CHECK(bytes.substr(8, length).find("\"dense_1/kernel\":{\"dtype\":\"F32\",\"shape\":[3,2]") != std::string::npos);
  CHECK(bytes.size() == 8 + length + (Model::kParams + Model::kState) * sizeof(float));
}

TEST_CASE("a file written by Python's safetensors loads") {
  testing::TempDir dir;
  const std::string path = dir.file("python.safetensors");
  write_all(path, unhex(kPythonFileHex));
  Sequential<Input<3>, Dense<2>> model{0};
  load_weights(model, path);
  CHECK(model.parameters() == std::vector<float>{0, 1, 2, 3, 4, 5, 0.5f, -0.5f});
}

TEST_CASE("bad files are Errors that name the file, the tensor and what was expected - the model is untouched") {
  testing::TempDir dir;
  const std::string good = dir.file("good.safetensors");
  Model model{3};
  save_weights(model, good);
  const std::string bytes = read_all(good);
  Model target{7};
  const std::vector<float> before = target.parameters();
  const auto load_bytes = [&](const std::string& name, const std::string& content) {
    const std::string path = dir.file(name);
    write_all(path, content);
    load_weights(target, path);
  };
  CHECK_THROWS_WITH_AS(load_weights(target, dir.file("missing.safetensors")), doctest::Contains("does not exist"),
                       Error);
  CHECK_THROWS_WITH_AS(load_bytes("short", "abc"), doctest::Contains("too short for a safetensors file"), Error);
  CHECK_THROWS_WITH_AS(load_bytes("truncated", bytes.substr(0, bytes.size() - 5)),
                       doctest::Contains("truncated or corrupt"), Error);
  CHECK_THROWS_WITH_AS(load_bytes("cut_header", bytes.substr(0, 40)), doctest::Contains("header length"), Error);
  std::string corrupt = bytes;
  corrupt[8] = '@';  // the header's opening brace
  CHECK_THROWS_WITH_AS(load_bytes("corrupt", corrupt), doctest::Contains("malformed JSON at byte"), Error);
  // Another model's file.
  const std::string other = dir.file("other.safetensors");
  save_weights(Other{1}, other);
  CHECK_THROWS_WITH_AS(load_weights(target, other), doctest::Contains("written for another model"), Error);
  // A file without lockstep's metadata whose tensor has another shape, or is missing.
  std::string reshaped = bytes;
  const std::size_t at = reshaped.find("\"shape\":[4,3]");
  REQUIRE(at != std::string::npos);
  reshaped.replace(at, 13, "\"shape\":[3,4]");
  const std::size_t meta = reshaped.find("\"layout_hash\"");
  reshaped[meta + 1] = 'X';  // no longer the layout hash: the tensor check speaks
  CHECK_THROWS_WITH_AS(load_bytes("reshaped", reshaped),
                       doctest::Contains("tensor 'dense/kernel' has shape [3, 4], expected [4, 3]"), Error);
  std::string renamed = reshaped;
  renamed.replace(renamed.find("\"dense/bias\""), 12, "\"dense/bios\"");
  renamed.replace(renamed.find("[3,4]"), 5, "[4,3]");
  CHECK_THROWS_WITH_AS(load_bytes("renamed", renamed), doctest::Contains("no tensor 'dense/bias'"), Error);
  CHECK(target.parameters() == before);
}

TEST_CASE("a fit resumed from a checkpoint equals an unbroken fit - bit for bit, shuffled, with Adam") {
  testing::TempDir dir;
  const Dataset data = testing::argmax_dataset(50, 4, 2, 3);
  FitOptions two = testing::quiet_fit(16, 2);  // shuffled, a short last batch
  const auto check = [&](auto strategy) {
    using S = decltype(strategy);
    Model straight{5};
    Trainer<S, Adam> a{strategy, Adam{0.01}};
    a.fit(straight, data, two);

    Model first{5};
    Trainer<S, Adam> b{strategy, Adam{0.01}};
    FitOptions one = two;
    one.epochs = 1;
    b.fit(first, data, one);
    const std::string path = dir.file("checkpoint.safetensors");
    save_checkpoint(b, first, path);

    Model resumed{0};
    Trainer<S, Adam> c{strategy, Adam{0.01}};
    load_checkpoint(c, resumed, path);
    CHECK(c.run_state().epoch == 1);
    FitOptions rest = two;
    rest.initial_epoch = c.run_state().epoch;
    c.fit(resumed, data, rest);
    CHECK(resumed.parameters() == straight.parameters());
    CHECK(resumed.state() == straight.state());
    CHECK(c.run_state().steps_done == a.run_state().steps_done);
  };
  check(MirroredPolicy<HostAllReduce>{1});
  check(MirroredPolicy<HostAllReduce>{2});  // the sharded update: each replica's Adam shard gathered
  check(MirroredPolicy<HostAllReduce>{3});
  check(CentralStoragePolicy{2});
}

TEST_CASE("a checkpoint that cannot be written is an Error, and the last good file stays intact") {
  testing::TempDir dir;
  const Dataset data = testing::argmax_dataset(20, 4, 2, 3);
  Model model{1};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}};
  trainer.fit(model, data, testing::quiet_fit(8, 1));
  CHECK_THROWS_WITH_AS(save_checkpoint(trainer, model, dir.file("no/such/dir/c.safetensors")),
                       doctest::Contains("cannot create"), Error);
  const std::string good = dir.file("c.safetensors");
  save_checkpoint(trainer, model, good);
  const std::string before = read_all(good);
  std::filesystem::permissions(dir.str(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const bool enforced = ::access(dir.str().c_str(), W_OK) != 0;  // root ignores directory permissions
  if (enforced) CHECK_THROWS_AS(save_checkpoint(trainer, model, good), Error);
  std::filesystem::permissions(dir.str(), std::filesystem::perms::owner_all);
  CHECK(read_all(good) == before);
}

TEST_CASE("check_can_save: a path save_checkpoint could not write is an Error before fit - nothing is written") {
  testing::TempDir dir;
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}};
  const std::string missing = "its folder '" + dir.file("no/such") + "' does not exist";
  CHECK_THROWS_WITH_AS(check_can_save(trainer, dir.file("no/such/c.safetensors")), doctest::Contains(missing.c_str()),
                       Error);
  CHECK_THROWS_WITH_AS(check_can_save(trainer, dir.str()), doctest::Contains("is a folder"), Error);
  write_all(dir.file("plain"), std::string("x"));
  const std::string not_folder = "its folder '" + dir.file("plain") + "' is not a folder";
  CHECK_THROWS_WITH_AS(check_can_save(trainer, dir.file("plain/c.safetensors")),
                       doctest::Contains(not_folder.c_str()), Error);

  // A writable path passes and is left as it was: absent, or the old file.
  const std::string fresh = dir.file("fresh.safetensors"), old = dir.file("old.safetensors");
  write_all(old, std::string("old bytes"));
  check_can_save(trainer, fresh);
  check_can_save(trainer, old);
  CHECK_FALSE(std::filesystem::exists(fresh));
  CHECK(read_all(old) == "old bytes");
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : std::filesystem::directory_iterator(dir.str())) ++files;
  CHECK(files == 2);  // "plain" and the old file: no temporary left behind

  std::filesystem::permissions(dir.str(), std::filesystem::perms::owner_read | std::filesystem::perms::owner_exec);
  const bool enforced = ::access(dir.str().c_str(), W_OK) != 0;  // root ignores directory permissions
  if (enforced)
    CHECK_THROWS_WITH_AS(check_can_save(trainer, fresh), doctest::Contains("Permission denied"), Error);
  std::filesystem::permissions(dir.str(), std::filesystem::perms::owner_all);
}

TEST_CASE("a checkpoint carries a CRC-32C of all its bytes: a bad, cut or foreign file is an Error, nothing restored") {
  testing::TempDir dir;
  const Dataset data = testing::argmax_dataset(20, 4, 2, 3);
  Model model{1};
  Trainer<MirroredPolicy<HostAllReduce>, Adam> trainer{MirroredPolicy<HostAllReduce>{2}};
  trainer.fit(model, data, testing::quiet_fit(8, 1));
  const std::string path = dir.file("c.safetensors");
  save_checkpoint(trainer, model, path);
  const std::string good = read_all(path);
  CHECK(good.find("\"crc32c\":\"") != std::string::npos);
  CHECK(good.find("\"step\":\"") != std::string::npos);
  const auto load_bytes = [&](const std::string& bytes) {
    write_all(path, bytes);
    Model target{9};
    Trainer<OneDevicePolicy, Adam> fresh;
    std::string message;
    try {
      load_checkpoint(fresh, target, path);
    } catch (const Error& e) {
      message = e.what();
    }
    if (!message.empty()) {
      CHECK(target.parameters() == Model{9}.parameters());
      CHECK(fresh.run_state().epoch == 0);
    }
    return message;
  };
  CHECK(load_bytes(good).empty());
  for (const std::size_t at : {std::size_t{3}, std::size_t{20}, good.size() / 2, good.size() - 1}) {
    std::string flipped = good;
    flipped[at] = static_cast<char>(flipped[at] ^ 0x01);
    CAPTURE(at);
    const std::string message = load_bytes(flipped);
    CHECK(!message.empty());
    CHECK(message.find(path) != std::string::npos);
  }
  std::string flipped = good;
  flipped[good.size() - 5] = static_cast<char>(flipped[good.size() - 5] ^ 0x01);  // in the optimizer's step count
  CHECK(load_bytes(flipped).find(": bad CRC-32C: the header records ") != std::string::npos);
  CHECK(load_bytes(good + "extra").find("bad CRC-32C") != std::string::npos);
  CHECK(load_bytes(good.substr(0, good.size() - 1)).find(std::to_string(good.size() - 1) + " bytes, but its header describes " +
                                                         std::to_string(good.size())) != std::string::npos);
  save_weights(model, path);
  CHECK(load_bytes(read_all(path)).find(": not a lockstep checkpoint") != std::string::npos);
}

TEST_CASE("initial_epoch outside [0, epochs] is an Error") {
  const Dataset data = testing::argmax_dataset(10, 4, 2, 3);
  Model model{1};
  Trainer<OneDevicePolicy, Adam> trainer;
  FitOptions options = testing::quiet_fit(4, 2);
  options.initial_epoch = 3;
  CHECK_THROWS_WITH_AS(trainer.fit(model, data, options), doctest::Contains("initial_epoch 3, expected in [0, epochs = 2]"),
                       Error);
}

// Cases the fuzzers (tests/fuzz) probe for: headers whose numbers are not
// counts, or whose sizes wrap around, are Errors rather than files accepted.
TEST_CASE("a safetensors header whose shape overflows or is not whole counts is an Error") {
  testing::TempDir dir;
  const std::string path = dir.file("odd.safetensors");
  // 2^40 * 2^24 elements wrap to 0 in 64 bits, which matched a 0-byte range.
  io::write_safetensors(path, {{"huge", "F32", {std::int64_t{1} << 40, std::int64_t{1} << 24}, nullptr, 0}}, {});
  CHECK_THROWS_WITH_AS(io::SafetensorsFile{path}, doctest::Contains("more elements than memory can hold"), Error);
  const auto with_header = [&](std::string header) {
    while (header.size() % 8) header += ' ';
    std::string bytes(8, '\0');
    const std::uint64_t length = header.size();
    std::memcpy(bytes.data(), &length, 8);
    write_all(path, bytes + header + std::string(8, '\0'));
    return path;
  };
  CHECK_THROWS_WITH_AS(io::SafetensorsFile{with_header(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})")},
                       doctest::Contains("tensor 't' has a dimension that is not a count"), Error);
  CHECK_THROWS_WITH_AS(io::SafetensorsFile{with_header(R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[0.5,2.5]}})")},
                       doctest::Contains("tensor 't' claims bytes [0.5, 2.5)"), Error);
  CHECK_THROWS_WITH_AS(io::SafetensorsFile{with_header(R"({"t":{"dtype":"U8","shape":[2],"data_offsets":["0",2]}})")},
                       doctest::Contains("tensor 't' claims bytes"), Error);
  CHECK_NOTHROW(io::SafetensorsFile{with_header(R"({"t":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})")});
}

TEST_CASE("a checkpoint whose run state is not a count in range is an Error") {
  testing::TempDir dir;
  const std::string path = dir.file("c.safetensors");
  Snapshot snap;
  snap.params.resize(Model::kParams);
  snap.state.resize(Model::kState);
  // The caller's extra metadata is written as it is, so a bad value keeps a good CRC.
  for (const char* epoch : {"-1", " 1", "2147483648", "99999999999999999999999"}) {
    CAPTURE(epoch);
    write_checkpoint<Model>(snap, path, {{"epoch", epoch}});
    CHECK_THROWS_WITH_AS(read_checkpoint<Model>(path), doctest::Contains("__metadata__ 'epoch' is '"), Error);
  }
  write_checkpoint<Model>(snap, path, {{"epoch", "2147483647"}});
  CHECK(read_checkpoint<Model>(path).run.epoch == 2147483647);
}
