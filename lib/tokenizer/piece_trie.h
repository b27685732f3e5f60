// Internal to lib/tokenizer: a byte trie over vocabulary pieces (Unigram's
// Viterbi walks it from every start position: sentencepiece's and
// Hugging Face's Unigram models).
#ifndef VOCABD_LIB_TOKENIZER_PIECE_TRIE_H_
#define VOCABD_LIB_TOKENIZER_PIECE_TRIE_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace vocabd {
namespace tokenizer_internal {

// A byte trie over the pieces: root children in a 256-entry table, other
// nodes' children as sorted (label, child) runs.
class PieceTrie {
 public:
  void Build(const std::vector<std::pair<std::string, int32_t>>& pieces) {
    struct Tmp {
      int32_t value = -1;
      std::vector<std::pair<uint8_t, int32_t>> kids;
    };
    std::vector<Tmp> tmp(1);
    for (const auto& [piece, id] : pieces) {
      int32_t node = 0;
      for (char ch : piece) {
        const auto b = static_cast<uint8_t>(ch);
        int32_t next = -1;
        for (const auto& [l, c] : tmp[node].kids) {
          if (l == b) next = c;
        }
        if (next < 0) {
          next = static_cast<int32_t>(tmp.size());
          tmp[node].kids.emplace_back(b, next);
          tmp.emplace_back();
        }
        node = next;
      }
      if (tmp[node].value < 0) tmp[node].value = id;  // first id wins
    }
    nodes_.resize(tmp.size());
    for (size_t i = 0; i < tmp.size(); ++i) {
      std::sort(tmp[i].kids.begin(), tmp[i].kids.end());
      nodes_[i].value = tmp[i].value;
      nodes_[i].first = static_cast<uint32_t>(labels_.size());
      nodes_[i].count = static_cast<uint32_t>(tmp[i].kids.size());
      for (const auto& [l, c] : tmp[i].kids) {
        labels_.push_back(l);
        children_.push_back(c);
      }
    }
    std::fill(root_.begin(), root_.end(), -1);
    for (const auto& [l, c] : tmp[0].kids) root_[l] = c;
  }
  // The child of `node` by byte b, -1 if none.
  int32_t Child(int32_t node, uint8_t b) const {
    if (node == 0) return root_[b];
    const Node& n = nodes_[node];
    const uint8_t* begin = labels_.data() + n.first;
    const uint8_t* end = begin + n.count;
    const uint8_t* it = n.count <= 8 ? std::find(begin, end, b) : std::lower_bound(begin, end, b);
    if (it == end || *it != b) return -1;
    return children_[n.first + (it - begin)];
  }
  int32_t Value(int32_t node) const { return nodes_[node].value; }
  // Nodes are numbered [0, node_count()).
  int32_t node_count() const { return static_cast<int32_t>(nodes_.size()); }

 private:
  struct Node {
    int32_t value;
    uint32_t first, count;
  };
  std::vector<Node> nodes_;
  std::vector<uint8_t> labels_;
  std::vector<int32_t> children_;
  std::array<int32_t, 256> root_;
};

}  // namespace tokenizer_internal
}  // namespace vocabd

#endif  // VOCABD_LIB_TOKENIZER_PIECE_TRIE_H_
