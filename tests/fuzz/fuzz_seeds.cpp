// Writes the seed corpora of the fuzz targets at run time, so that no binary
// file is committed: fuzz_seeds <dir> fills <dir>/idx, <dir>/csv and
// <dir>/safetensors with small valid files (the IDX ones plain and gzipped,
// the weights and checkpoints written by lockstep itself) and a few near misses.
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz/model.hpp"

namespace {
namespace fs = std::filesystem;

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path.string());
}

void write_gzip(const fs::path& path, const std::string& bytes) {
  gzFile file = gzopen(path.string().c_str(), "wb9");
  if (!file || gzwrite(file, bytes.data(), static_cast<unsigned>(bytes.size())) != static_cast<int>(bytes.size()) ||
      gzclose(file) != Z_OK)
    throw std::runtime_error("cannot write " + path.string());
}

// An unsigned-byte IDX file of the given dimensions, its bytes counting up.
std::string idx(const std::vector<std::uint32_t>& dims) {
  std::string out{'\0', '\0', '\x08', static_cast<char>(dims.size())};
  std::size_t total = 1;
  for (std::uint32_t d : dims) {
    for (int shift = 24; shift >= 0; shift -= 8) out.push_back(static_cast<char>((d >> shift) & 0xffu));
    total *= d;
  }
  for (std::size_t i = 0; i < total; ++i) out.push_back(static_cast<char>(i * 37 % 256));
  return out;
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds <dir>\n");
    return 2;
  }
  const fs::path root = argv[1];
  for (const char* sub : {"idx", "csv", "safetensors"}) fs::create_directories(root / sub);

  const std::string images = idx({3, 4, 5}), labels = idx({3}), matrix = idx({2, 6});
  write_file(root / "idx/images", images);
  write_file(root / "idx/labels", labels);
  write_file(root / "idx/matrix", matrix);
  write_file(root / "idx/truncated", images.substr(0, images.size() - 7));
  write_file(root / "idx/trailing", labels + "xyz");
  write_gzip(root / "idx/images.gz", images);
  write_gzip(root / "idx/labels.gz", labels);
  write_gzip(root / "idx/truncated.gz", images.substr(0, 20));

  write_file(root / "csv/classes", "1.0,2.0,0\n3.5,-4.25,1\n0,0,2\n");
  write_file(root / "csv/header_crlf", "x,y,label\r\n0.5,1e-3,1\r\n\r\n2,3,0\r\n");
  write_file(root / "csv/semicolons", "\xEF\xBB\xBF" "255;0;128;3\n 12 ; 7 ;0;1\n");
  write_file(root / "csv/tabs", "1\t2\t3\t4\n5\t6\t7\t8\n");
  write_file(root / "csv/regression", "0.1,0.2,0.3\n-1,2.5e2,3\n");
  write_file(root / "csv/bad", "1,2,nan\n1,,x\n+4,inf,-2\n");

  using lockstep_fuzz::Model;
  Model model{3};
  for (std::size_t i = 0; i < model.state().size(); ++i) model.state()[i] = 0.25f * static_cast<float>(i);
  lockstep::save_weights(model, (root / "safetensors/weights").string());
  lockstep::Snapshot snap;
  snap.params = model.parameters();
  snap.state = model.state();
  snap.slots = {{"m", std::vector<float>(Model::kParams, 0.5f)}, {"v", std::vector<float>(Model::kParams, 0.125f)}};
  snap.iterations = 42;
  snap.run.epoch = 2;
  snap.run.step = 7;
  snap.run.seed = 1234;
  snap.run.steps_done = 31;
  lockstep::write_checkpoint<Model>(snap, (root / "safetensors/checkpoint").string());
  snap.slots.clear();
  lockstep::write_checkpoint<Model>(snap, (root / "safetensors/checkpoint_sgd").string());
  // Other dtypes and an empty tensor, without lockstep's metadata (as Python writes them).
  const std::int64_t ints[3] = {1, -2, 3};
  const std::uint8_t bytes[4] = {0, 1, 2, 255};
  lockstep::io::write_safetensors((root / "safetensors/dtypes").string(),
                                  {{"ints", "I64", {3}, ints, sizeof ints},
                                   {"bytes", "U8", {2, 2}, bytes, sizeof bytes},
                                   {"empty", "F32", {0, 4}, nullptr, 0}},
                                  {{"note", "a \"quoted\" value"}});
  return 0;
}
