// attnkit tests: corpus cases by file name (tests/cases/...), built for run_case, for the suites that run a few
// whole cases under conditions of their own (several callers at once, a host's thread pool).
#pragma once
#include <gtest/gtest.h>

#include <initializer_list>
#include <string>
#include <vector>

#include "case_file.h"

namespace attnkit {

inline std::vector<Case> load_corpus_cases(std::initializer_list<const char*> files) {
  std::string root = __FILE__;  // <root>/tests/native/corpus_cases.h
  for (int up = 0; up < 2; ++up) root = root.substr(0, root.find_last_of('/'));
  std::vector<Case> all;
  for (const char* file : files) {
    std::string text;
    JsonValue doc;
    std::vector<const JsonValue*> listed;
    EXPECT_TRUE(read_text_file(root + "/cases/" + file, &text).ok()) << file;
    EXPECT_TRUE(parse_json(text, &doc).ok()) << file;
    EXPECT_TRUE(list_cases(doc, &listed).ok()) << file;
    for (size_t i = 0; i < listed.size(); ++i) {
      all.emplace_back();
      EXPECT_TRUE(build_case(*listed[i], i, &all.back()).ok()) << file;
    }
  }
  return all;
}

}  // namespace attnkit
