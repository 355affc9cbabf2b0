#include "api/list_filter.h"

#include <cctype>
#include <string_view>
#include <vector>

#include "common/time.h"
#include "spec/job_state.h"

namespace stoker::api {

enum class Field { kUser, kDisplayName, kState, kCreateTime, kLabel, kHasLabel };
enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kHas };

struct FilterNode {
  enum class Kind { kAnd, kOr, kNot, kRestriction } kind = Kind::kRestriction;
  std::vector<std::shared_ptr<const FilterNode>> children;  // kAnd, kOr, kNot
  Field field = Field::kDisplayName;
  Op op = Op::kEq;
  std::string key;    // label key
  std::string value;  // display name, state name, label value or pattern
  int64_t time_us = 0;
};

namespace {

// '*' matches any run of characters; everything else matches itself.
bool GlobMatch(std::string_view pattern, std::string_view text) {
  size_t p = 0, t = 0, star = std::string_view::npos, mark = 0;
  while (t < text.size()) {
    if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      mark = t;
    } else if (p < pattern.size() && pattern[p] == text[t]) {
      ++p;
      ++t;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      t = ++mark;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

bool Compare(Op op, int64_t a, int64_t b) {
  switch (op) {
    case Op::kEq:
      return a == b;
    case Op::kNe:
      return a != b;
    case Op::kLt:
      return a < b;
    case Op::kLe:
      return a <= b;
    case Op::kGt:
      return a > b;
    case Op::kGe:
      return a >= b;
    case Op::kHas:
      return false;
  }
  return false;
}

bool Eval(const FilterNode& n, const FilterSubject& s) {
  switch (n.kind) {
    case FilterNode::Kind::kAnd:
      for (const auto& c : n.children)
        if (!Eval(*c, s)) return false;
      return true;
    case FilterNode::Kind::kOr:
      for (const auto& c : n.children)
        if (Eval(*c, s)) return true;
      return false;
    case FilterNode::Kind::kNot:
      return !Eval(*n.children[0], s);
    case FilterNode::Kind::kRestriction:
      break;
  }
  switch (n.field) {
    case Field::kUser:
      if (n.op == Op::kHas) return GlobMatch(n.value, s.user);
      return (s.user == n.value) == (n.op == Op::kEq);
    case Field::kDisplayName:
      if (n.op == Op::kHas) return GlobMatch(n.value, s.display_name);
      return (s.display_name == n.value) == (n.op == Op::kEq);
    case Field::kState:
      return (s.state == n.value) == (n.op == Op::kEq);
    case Field::kCreateTime:
      return Compare(n.op, s.create_time_us, n.time_us);
    case Field::kHasLabel:
      return s.labels.count(n.key) > 0;
    case Field::kLabel: {
      auto it = s.labels.find(n.key);
      if (n.op == Op::kHas) return it != s.labels.end() && GlobMatch(n.value, it->second);
      bool eq = it != s.labels.end() && it->second == n.value;
      return eq == (n.op == Op::kEq);
    }
  }
  return false;
}

const char* OpText(Op op) {
  switch (op) {
    case Op::kEq:
      return "=";
    case Op::kNe:
      return "!=";
    case Op::kLt:
      return "<";
    case Op::kLe:
      return "<=";
    case Op::kGt:
      return ">";
    case Op::kGe:
      return ">=";
    case Op::kHas:
      return ":";
  }
  return "?";
}

bool IsFieldChar(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' ||
         c == '/';
}

using NodePtr = std::shared_ptr<const FilterNode>;

class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Result<NodePtr> Parse() {
    SkipSpace();
    STOKER_ASSIGN_OR_RETURN(NodePtr root, Expression());
    SkipSpace();
    if (pos_ < s_.size()) {
      if (s_[pos_] == ')') return Fail("unbalanced ')'; expected AND, OR or the end of the filter");
      return Fail("expected AND, OR or the end of the filter, got '" + Peek() + "'");
    }
    return root;
  }

 private:
  Status Fail(const std::string& what) const { return FailAt(pos_, what); }
  Status FailAt(size_t at, const std::string& what) const {
    return InvalidArgument("filter: at " + std::to_string(at + 1) + ": " + what);
  }

  void SkipSpace() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool AtEnd() const { return pos_ >= s_.size(); }

  // The next few characters, for messages.
  std::string Peek() const {
    size_t end = pos_;
    while (end < s_.size() && end - pos_ < 20 && !std::isspace(static_cast<unsigned char>(s_[end])))
      ++end;
    return end == pos_ ? std::string(1, s_[pos_]) : s_.substr(pos_, end - pos_);
  }

  // True (and consumed) when the keyword `kw` stands at pos_ as a whole word.
  bool Keyword(std::string_view kw) {
    if (s_.compare(pos_, kw.size(), kw) != 0) return false;
    size_t after = pos_ + kw.size();
    if (after < s_.size() && !std::isspace(static_cast<unsigned char>(s_[after])) &&
        s_[after] != '(')
      return false;
    pos_ = after;
    return true;
  }
  bool PeekKeyword(std::string_view kw) {
    size_t save = pos_;
    bool yes = Keyword(kw);
    pos_ = save;
    return yes;
  }

  static NodePtr Combine(FilterNode::Kind kind, std::vector<NodePtr> parts) {
    if (parts.size() == 1) return parts[0];
    auto n = std::make_shared<FilterNode>();
    n->kind = kind;
    n->children = std::move(parts);
    return n;
  }

  // expression := sequence { AND sequence }
  Result<NodePtr> Expression() {
    std::vector<NodePtr> parts;
    STOKER_ASSIGN_OR_RETURN(NodePtr first, Sequence());
    parts.push_back(first);
    for (;;) {
      SkipSpace();
      if (!Keyword("AND")) break;
      SkipSpace();
      if (AtEnd() || s_[pos_] == ')') return FailAt(pos_, "expected a restriction after 'AND'");
      STOKER_ASSIGN_OR_RETURN(NodePtr next, Sequence());
      parts.push_back(next);
    }
    return Combine(FilterNode::Kind::kAnd, std::move(parts));
  }

  // sequence := factor { factor }   (implicit AND)
  Result<NodePtr> Sequence() {
    std::vector<NodePtr> parts;
    STOKER_ASSIGN_OR_RETURN(NodePtr first, Factor());
    parts.push_back(first);
    for (;;) {
      SkipSpace();
      if (AtEnd() || s_[pos_] == ')' || PeekKeyword("AND") || PeekKeyword("OR")) break;
      STOKER_ASSIGN_OR_RETURN(NodePtr next, Factor());
      parts.push_back(next);
    }
    return Combine(FilterNode::Kind::kAnd, std::move(parts));
  }

  // factor := term { OR term }
  Result<NodePtr> Factor() {
    std::vector<NodePtr> parts;
    STOKER_ASSIGN_OR_RETURN(NodePtr first, Term());
    parts.push_back(first);
    for (;;) {
      SkipSpace();
      if (!Keyword("OR")) break;
      SkipSpace();
      if (AtEnd() || s_[pos_] == ')') return FailAt(pos_, "expected a restriction after 'OR'");
      STOKER_ASSIGN_OR_RETURN(NodePtr next, Term());
      parts.push_back(next);
    }
    return Combine(FilterNode::Kind::kOr, std::move(parts));
  }

  // term := [NOT | '-'] term | '(' expression ')' | restriction
  Result<NodePtr> Term() {
    SkipSpace();
    if (AtEnd()) return Fail("expected a restriction such as state=\"JOB_STATE_RUNNING\"");
    bool negate = false;
    if (Keyword("NOT")) {
      negate = true;
    } else if (s_[pos_] == '-') {
      ++pos_;
      negate = true;
    }
    if (negate) {
      SkipSpace();
      if (AtEnd() || s_[pos_] == ')') return Fail("expected a restriction after 'NOT'");
      if (++depth_ > kMaxFilterDepth) {
        return Fail("nested more than " + std::to_string(kMaxFilterDepth) + " deep");
      }
      STOKER_ASSIGN_OR_RETURN(NodePtr inner, Term());
      --depth_;
      auto n = std::make_shared<FilterNode>();
      n->kind = FilterNode::Kind::kNot;
      n->children.push_back(inner);
      return NodePtr(n);
    }
    if (s_[pos_] == '(') {
      size_t open = pos_++;
      if (++depth_ > kMaxFilterDepth) {
        return FailAt(open, "nested more than " + std::to_string(kMaxFilterDepth) + " deep");
      }
      SkipSpace();
      if (!AtEnd() && s_[pos_] == ')') return Fail("expected a restriction inside '()'");
      STOKER_ASSIGN_OR_RETURN(NodePtr inner, Expression());
      SkipSpace();
      if (AtEnd() || s_[pos_] != ')') {
        return Fail("expected ')' to close the '(' at " + std::to_string(open + 1));
      }
      ++pos_;
      --depth_;
      return inner;
    }
    return Restriction();
  }

  // restriction := field comparator value
  Result<NodePtr> Restriction() {
    size_t field_at = pos_;
    while (pos_ < s_.size() && IsFieldChar(s_[pos_])) ++pos_;
    std::string field = s_.substr(field_at, pos_ - field_at);
    if (field.empty()) {
      return Fail("expected a field (display_name, user, state, create_time or labels.KEY), got '" +
                  Peek() + "'");
    }
    auto n = std::make_shared<FilterNode>();
    if (field == "display_name" || field == "displayName") {
      n->field = Field::kDisplayName;
    } else if (field == "user") {
      n->field = Field::kUser;
    } else if (field == "state") {
      n->field = Field::kState;
    } else if (field == "create_time" || field == "createTime") {
      n->field = Field::kCreateTime;
    } else if (field == "labels") {
      n->field = Field::kHasLabel;
    } else if (field.rfind("labels.", 0) == 0 && field.size() > 7) {
      n->field = Field::kLabel;
      n->key = field.substr(7);
    } else {
      return FailAt(field_at,
                    "unknown field '" + field +
                        "'; expected display_name, user, state, create_time or labels.KEY");
    }
    SkipSpace();
    size_t op_at = pos_;
    if (!ReadOp(&n->op)) {
      return Fail("expected an operator (=, !=, <, <=, >, >= or :) after '" + field + "'");
    }
    std::string op = OpText(n->op);
    auto refuse = [&](const std::string& allowed) {
      return FailAt(op_at, field + " supports " + allowed + ", not '" + op + "'");
    };
    switch (n->field) {
      case Field::kUser:
      case Field::kDisplayName:
        if (n->op != Op::kEq && n->op != Op::kNe && n->op != Op::kHas) return refuse("=, != and :");
        break;
      case Field::kState:
        if (n->op != Op::kEq && n->op != Op::kNe) return refuse("= and !=");
        break;
      case Field::kCreateTime:
        if (n->op == Op::kHas) return refuse("=, !=, <, <=, > and >=");
        break;
      case Field::kLabel:
        if (n->op != Op::kEq && n->op != Op::kNe && n->op != Op::kHas) return refuse("=, != and :");
        break;
      case Field::kHasLabel:
        if (n->op != Op::kHas) return refuse("only ':' (labels:KEY)");
        break;
    }
    SkipSpace();
    size_t value_at = pos_;
    STOKER_ASSIGN_OR_RETURN(n->value, Value(op));
    switch (n->field) {
      case Field::kState:
        if (!spec::ParseJobState(n->value)) {
          return FailAt(value_at,
                        "expected a job state such as JOB_STATE_SUCCEEDED, got '" + n->value + "'");
        }
        break;
      case Field::kCreateTime: {
        auto t = ParseRfc3339Micros(n->value);
        if (!t) {
          return FailAt(
              value_at,
              "expected an RFC 3339 time such as \"2021-05-18T00:00:00Z\", got '" + n->value + "'");
        }
        n->time_us = *t;
        break;
      }
      case Field::kHasLabel:
        n->key = n->value;
        if (n->key.empty()) return FailAt(value_at, "expected a label key after 'labels:'");
        break;
      case Field::kLabel:
        if (n->op == Op::kHas && n->value == "*") n->field = Field::kHasLabel;
        break;
      case Field::kUser:
      case Field::kDisplayName:
        break;
    }
    return NodePtr(n);
  }

  bool ReadOp(Op* op) {
    if (AtEnd()) return false;
    char c = s_[pos_];
    char d = pos_ + 1 < s_.size() ? s_[pos_ + 1] : '\0';
    if (c == '=') {
      *op = Op::kEq;
      pos_ += 1;
    } else if (c == '!' && d == '=') {
      *op = Op::kNe;
      pos_ += 2;
    } else if (c == '<') {
      *op = d == '=' ? Op::kLe : Op::kLt;
      pos_ += d == '=' ? 2 : 1;
    } else if (c == '>') {
      *op = d == '=' ? Op::kGe : Op::kGt;
      pos_ += d == '=' ? 2 : 1;
    } else if (c == ':') {
      *op = Op::kHas;
      pos_ += 1;
    } else {
      return false;
    }
    return true;
  }

  // A quoted string ("..." or '...', backslash escapes) or a bare word that
  // runs to whitespace or ')'.
  Result<std::string> Value(const std::string& op) {
    if (AtEnd()) return Fail("expected a value after '" + op + "'");
    char q = s_[pos_];
    if (q == '"' || q == '\'') {
      size_t open = pos_++;
      std::string out;
      while (pos_ < s_.size() && s_[pos_] != q) {
        if (s_[pos_] == '\\') {
          if (++pos_ >= s_.size()) break;
        }
        out += s_[pos_++];
      }
      if (AtEnd())
        return FailAt(open, "unterminated string; expected a closing " + std::string(1, q));
      ++pos_;
      return out;
    }
    size_t start = pos_;
    while (pos_ < s_.size() && !std::isspace(static_cast<unsigned char>(s_[pos_])) &&
           s_[pos_] != ')' && s_[pos_] != '(')
      ++pos_;
    if (pos_ == start) return Fail("expected a value after '" + op + "'");
    return s_.substr(start, pos_ - start);
  }

  const std::string& s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

bool Filter::Matches(const FilterSubject& subject) const {
  return root_ == nullptr || Eval(*root_, subject);
}

Result<Filter> ParseFilter(const std::string& text) {
  if (text.size() > kMaxFilterLength) {
    return InvalidArgument("filter: is " + std::to_string(text.size()) +
                           " characters long; at most " + std::to_string(kMaxFilterLength) +
                           " are accepted");
  }
  bool blank = true;
  for (char c : text)
    if (!std::isspace(static_cast<unsigned char>(c))) blank = false;
  if (blank) return Filter();
  Parser p(text);
  STOKER_ASSIGN_OR_RETURN(NodePtr root, p.Parse());
  return Filter(root);
}

}  // namespace stoker::api
