// Parses a Prometheus text exposition (format 0.0.4, what /metrics serves)
// so tests check samples by name and label set, whatever order the
// serializer writes labels and lines in. A malformed line, a sample before
// its family's `# TYPE`, or a family declared twice fails the test.
#ifndef VOCABD_TESTS_SERVER_PROMETHEUS_TEXT_H_
#define VOCABD_TESTS_SERVER_PROMETHEUS_TEXT_H_

#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

namespace vocabd::testing {

class PrometheusText {
 public:
  using Labels = std::map<std::string, std::string>;

  explicit PrometheusText(const std::string& text) {
    size_t start = 0;
    while (start < text.size()) {
      size_t end = text.find('\n', start);
      if (end == std::string::npos) end = text.size();
      ParseLine(text.substr(start, end - start));
      start = end + 1;
    }
  }

  // The value of `name` with exactly `labels`; nullopt when absent.
  std::optional<double> Value(const std::string& name, const Labels& labels = {}) const {
    auto it = samples_.find({name, labels});
    if (it == samples_.end()) return std::nullopt;
    return it->second;
  }
  // "counter", "gauge", "histogram", ...; "" when the family is not declared.
  std::string Type(const std::string& family) const {
    auto it = types_.find(family);
    return it == types_.end() ? "" : it->second;
  }
  bool HasHelp(const std::string& family) const { return help_.count(family) > 0; }
  // Series of `name` (any labels).
  size_t Count(const std::string& name) const {
    size_t n = 0;
    for (const auto& [key, value] : samples_) n += key.first == name;
    return n;
  }

 private:
  void ParseLine(const std::string& line) {
    if (line.empty()) return;
    if (line.rfind("# HELP ", 0) == 0 || line.rfind("# TYPE ", 0) == 0) {
      const std::string rest = line.substr(7);
      const size_t space = rest.find(' ');
      ASSERT_NE(space, std::string::npos) << line;
      const std::string family = rest.substr(0, space);
      auto& map = line[2] == 'H' ? help_ : types_;
      EXPECT_TRUE(map.emplace(family, rest.substr(space + 1)).second)
          << "family declared twice: " << line;
      return;
    }
    if (line[0] == '#') return;  // comment
    size_t pos = line.find_first_of("{ ");
    ASSERT_NE(pos, std::string::npos) << line;
    const std::string name = line.substr(0, pos);
    EXPECT_FALSE(FamilyType(name).empty()) << "sample without # TYPE: " << line;
    Labels labels;
    if (line[pos] == '{') {
      ++pos;
      while (pos < line.size() && line[pos] != '}') {
        const size_t eq = line.find("=\"", pos);
        ASSERT_NE(eq, std::string::npos) << line;
        const std::string key = line.substr(pos, eq - pos);
        std::string value;
        for (pos = eq + 2; pos < line.size() && line[pos] != '"'; ++pos) {
          if (line[pos] == '\\' && pos + 1 < line.size()) {
            ++pos;
            value += line[pos] == 'n' ? '\n' : line[pos];
          } else {
            value += line[pos];
          }
        }
        ASSERT_LT(pos, line.size()) << "unterminated label value: " << line;
        EXPECT_TRUE(labels.emplace(key, value).second) << "label twice: " << line;
        ++pos;  // closing quote
        if (pos < line.size() && line[pos] == ',') ++pos;
      }
      ASSERT_LT(pos, line.size()) << "unterminated labels: " << line;
      ++pos;  // '}'
    }
    ASSERT_TRUE(pos < line.size() && line[pos] == ' ') << line;
    const std::string value = line.substr(pos + 1, line.find(' ', pos + 1) - pos - 1);
    char* end = nullptr;
    const double v = value == "+Inf" ? HUGE_VAL : std::strtod(value.c_str(), &end);
    if (value != "+Inf") {
      ASSERT_TRUE(end != nullptr && *end == '\0') << line;
    }
    EXPECT_TRUE(samples_.emplace(std::make_pair(name, labels), v).second)
        << "series twice: " << line;
  }

  // The declared type of the family `sample` belongs to (histogram samples
  // end in _bucket, _sum, _count).
  std::string FamilyType(const std::string& sample) const {
    if (auto it = types_.find(sample); it != types_.end()) return it->second;
    for (const char* suffix : {"_bucket", "_sum", "_count"}) {
      const std::string s(suffix);
      if (sample.size() > s.size() && sample.compare(sample.size() - s.size(), s.size(), s) == 0) {
        if (auto it = types_.find(sample.substr(0, sample.size() - s.size()));
            it != types_.end() && it->second == "histogram") {
          return it->second;
        }
      }
    }
    return "";
  }

  std::map<std::string, std::string> help_;
  std::map<std::string, std::string> types_;
  std::map<std::pair<std::string, Labels>, double> samples_;
};

}  // namespace vocabd::testing

#endif  // VOCABD_TESTS_SERVER_PROMETHEUS_TEXT_H_
