// Running `tessera` as a subprocess from the source dir, for the CLI tests.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace {

struct Result {
  int status = -1;
  std::string out, err;
};

inline std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs from the source dir so that messages carry the short paths users type.
inline Result tessera(const std::string& args) {
  static int n = 0;
  std::string err_path =
      testing::TempDir() + "/tessera_cli_err_" + std::to_string(::getpid()) + "_" + std::to_string(n++);
  std::string cmd = std::string("cd '") + TESSERA_SOURCE_DIR + "' && '" + TESSERA_BINARY_DIR +
                    "/bin/tessera' " + args + " 2>'" + err_path + "'";
  Result r;
  FILE* p = ::popen(cmd.c_str(), "r");
  if (!p) return r;
  char buf[4096];
  size_t got;
  while ((got = std::fread(buf, 1, sizeof buf, p)) > 0) r.out.append(buf, got);
  int st = ::pclose(p);
  r.status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
  r.err = slurp(err_path);
  std::filesystem::remove(err_path);
  return r;
}

inline std::string write_temp(const std::string& name, const std::string& content) {
  std::string path = testing::TempDir() + "/" + name;
  std::ofstream(path, std::ios::binary) << content;
  return path;
}

inline std::vector<std::string> lines(const std::string& s) {
  std::vector<std::string> v;
  std::istringstream in(s);
  for (std::string l; std::getline(in, l);) v.push_back(l);
  return v;
}

}  // namespace
