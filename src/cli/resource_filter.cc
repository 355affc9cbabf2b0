// The --filter language and the list flags (--sort-by, --limit,
// --page-size): ResourceFilter, ApplyListFlags in output_format.h.
#include <algorithm>
#include <cctype>
#include <regex>
#include <string_view>

#include "cli/output_format.h"
#include "cli/output_format_internal.h"

namespace stoker::cli {

using format_internal::CompareValues;
using format_internal::IsWordChar;
using format_internal::Lookup;
using format_internal::Lower;
using format_internal::NumberOf;
using format_internal::ParseNumber;
using format_internal::ParsePath;
using format_internal::ParseTime;
using format_internal::ScalarText;
using format_internal::Scanner;
using format_internal::Segment;
using format_internal::Truthy;
using nlohmann::json;

namespace {
enum class Op { kEq, kNe, kLt, kLe, kGt, kGe, kHas, kMatch, kNoMatch };
constexpr int kMaxFilterNesting = 32;
constexpr size_t kMaxFilterText = 4096;
}  // namespace

struct ResourceFilter::Node {
  enum class Kind { kAll, kAny, kNot, kTerm } kind = Kind::kTerm;
  std::vector<std::shared_ptr<const Node>> kids;
  std::vector<Segment> path;
  Op op = Op::kEq;
  std::vector<std::string> values;  // one, or the list of key=(a b) / key:(a b)
  std::shared_ptr<const std::regex> re;
};

namespace {

using NodeRef = std::shared_ptr<const ResourceFilter::Node>;
using Node = ResourceFilter::Node;

// Words: runs of letters and digits, compared without case.
std::vector<std::string> Words(const std::string& s) {
  std::vector<std::string> out;
  std::string w;
  for (char c : s) {
    if (IsWordChar(c)) {
      w += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    } else if (!w.empty()) {
      out.push_back(std::move(w));
      w.clear();
    }
  }
  if (!w.empty()) out.push_back(std::move(w));
  return out;
}

// gcloud's ':' match: the pattern's words stand together among the value's
// words; a trailing '*' makes the last one a prefix.
bool WordMatch(const std::string& text, std::string pattern) {
  bool prefix = !pattern.empty() && pattern.back() == '*';
  if (prefix) pattern.pop_back();
  std::vector<std::string> want = Words(pattern), have = Words(text);
  if (want.empty()) return Lower(text).find(Lower(pattern)) != std::string::npos;
  for (size_t i = 0; i + want.size() <= have.size(); ++i) {
    size_t k = 0;
    for (; k < want.size(); ++k) {
      const std::string& h = have[i + k];
      bool last = k + 1 == want.size();
      if (last && prefix ? h.compare(0, want[k].size(), want[k]) != 0 : h != want[k]) break;
    }
    if (k == want.size()) return true;
  }
  return false;
}

bool Holds(Op op, int cmp) {
  switch (op) {
    case Op::kEq:
      return cmp == 0;
    case Op::kLt:
      return cmp < 0;
    case Op::kLe:
      return cmp <= 0;
    case Op::kGt:
      return cmp > 0;
    case Op::kGe:
      return cmp >= 0;
    default:
      return false;
  }
}

// `value` (a scalar) against one operand of =, <, <=, >, >=.
bool CompareTerm(const json& value, Op op, const std::string& operand) {
  if (value.is_boolean()) {
    std::string o = Lower(operand);
    if (o != "true" && o != "false") return false;
    return Holds(op, value.get<bool>() == (o == "true") ? 0 : (value.get<bool>() ? 1 : -1));
  }
  auto n = NumberOf(value);
  auto m = ParseNumber(operand);
  if (n && m) return Holds(op, *n < *m ? -1 : (*n > *m ? 1 : 0));
  std::string text = ScalarText(value);
  auto t = ParseTime(text), u = ParseTime(operand);
  if (t && u) return Holds(op, *t < *u ? -1 : (*t > *u ? 1 : 0));
  return Holds(op, text.compare(operand) < 0 ? -1 : (text == operand ? 0 : 1));
}

bool TermHolds(const Node& n, const json& v) {
  if (v.is_null()) return false;
  if (v.is_array()) {
    if (n.op == Op::kHas && n.values.size() == 1 && n.values[0] == "*") return !v.empty();
    return std::any_of(v.begin(), v.end(), [&](const json& item) { return TermHolds(n, item); });
  }
  switch (n.op) {
    case Op::kHas:
      return std::any_of(n.values.begin(), n.values.end(), [&](const std::string& p) {
        if (p == "*") return Truthy(v) || v.is_number() || v.is_boolean();
        if (v.is_object()) {
          for (auto it = v.begin(); it != v.end(); ++it)
            if (WordMatch(it.key(), p)) return true;
          return false;
        }
        return WordMatch(ScalarText(v), p);
      });
    case Op::kMatch:
      if (v.is_object()) return false;
      return std::regex_search(ScalarText(v), *n.re);
    default:
      if (v.is_object()) return false;
      return std::any_of(n.values.begin(), n.values.end(),
                         [&](const std::string& o) { return CompareTerm(v, n.op, o); });
  }
}

bool Evaluate(const Node& n, const json& resource) {
  switch (n.kind) {
    case Node::Kind::kAll:
      return std::all_of(n.kids.begin(), n.kids.end(),
                         [&](const NodeRef& k) { return Evaluate(*k, resource); });
    case Node::Kind::kAny:
      return std::any_of(n.kids.begin(), n.kids.end(),
                         [&](const NodeRef& k) { return Evaluate(*k, resource); });
    case Node::Kind::kNot:
      return !Evaluate(*n.kids[0], resource);
    case Node::Kind::kTerm:
      break;
  }
  auto v = Lookup(resource, n.path, 0);
  return v.has_value() && TermHolds(n, *v);
}

constexpr char kOperators[] = "=, !=, <, <=, >, >=, :, ~ or !~";

class FilterParser {
 public:
  explicit FilterParser(const std::string& text) : text_(text), sc_(text, "--filter") {}

  Result<NodeRef> Parse() {
    STOKER_ASSIGN_OR_RETURN(NodeRef root, Conjunction());
    sc_.SkipSpace();
    if (!sc_.AtEnd()) return sc_.Error("unbalanced ')'; remove it or add a '(' before it");
    return root;
  }

 private:
  static NodeRef Group(Node::Kind kind, std::vector<NodeRef> kids) {
    if (kids.size() == 1) return kids[0];
    auto n = std::make_shared<Node>();
    n->kind = kind;
    n->kids = std::move(kids);
    return n;
  }

  // A keyword standing alone: followed by a blank, '(' or the end.
  bool Keyword(std::string_view word) {
    if (!sc_.StartsWith(word)) return false;
    std::string_view after = sc_.Rest().substr(word.size());
    if (!after.empty() && !std::isspace(static_cast<unsigned char>(after[0])) && after[0] != '(')
      return false;
    sc_.Advance(word.size());
    return true;
  }

  // conjunction := chain { chain }   (juxtaposition: AND below OR)
  Result<NodeRef> Conjunction() {
    std::vector<NodeRef> kids;
    do {
      STOKER_ASSIGN_OR_RETURN(NodeRef k, Chain());
      kids.push_back(std::move(k));
      sc_.SkipSpace();
    } while (!sc_.AtEnd() && sc_.Peek() != ')');
    return Group(Node::Kind::kAll, std::move(kids));
  }

  // chain := unary { AND unary } | unary { OR unary }
  Result<NodeRef> Chain() {
    std::vector<NodeRef> kids;
    STOKER_ASSIGN_OR_RETURN(NodeRef first, Unary());
    kids.push_back(std::move(first));
    std::string joiner;
    for (;;) {
      sc_.SkipSpace();
      size_t at = sc_.pos();
      std::string word = Keyword("AND") ? "AND" : Keyword("OR") ? "OR" : "";
      if (word.empty()) break;
      if (!joiner.empty() && word != joiner) {
        return sc_.ErrorAt(at,
                           "AND and OR need parentheses to combine; write (a AND b) OR c "
                           "or a AND (b OR c)");
      }
      joiner = word;
      STOKER_ASSIGN_OR_RETURN(NodeRef next, Unary());
      kids.push_back(std::move(next));
    }
    return Group(joiner == "OR" ? Node::Kind::kAny : Node::Kind::kAll, std::move(kids));
  }

  // unary := NOT unary | '-' unary | '(' conjunction ')' | term
  Result<NodeRef> Unary() {
    sc_.SkipSpace();
    if (sc_.AtEnd() || sc_.Peek() == ')') {
      return sc_.Error("expected a term such as state=JOB_STATE_RUNNING or labels.team:*");
    }
    if (depth_ >= kMaxFilterNesting) {
      return sc_.Error("nested deeper than " + std::to_string(kMaxFilterNesting) + "; simplify it");
    }
    if (Keyword("NOT") || sc_.Eat('-')) {
      ++depth_;
      STOKER_ASSIGN_OR_RETURN(NodeRef inner, Unary());
      --depth_;
      auto n = std::make_shared<Node>();
      n->kind = Node::Kind::kNot;
      n->kids.push_back(std::move(inner));
      return NodeRef(n);
    }
    if (sc_.Peek() == '(') {
      size_t open = sc_.pos();
      sc_.Advance();
      ++depth_;
      STOKER_ASSIGN_OR_RETURN(NodeRef inner, Conjunction());
      --depth_;
      if (!sc_.Eat(')')) return sc_.ErrorAt(open, "'(' is not closed; add ')'");
      return inner;
    }
    return Term();
  }

  bool ReadOp(Op* op) {
    static constexpr std::pair<std::string_view, Op> kOps[] = {
        {"!=", Op::kNe}, {"!~", Op::kNoMatch}, {"<=", Op::kLe}, {">=", Op::kGe},  {"=", Op::kEq},
        {"<", Op::kLt},  {">", Op::kGt},       {":", Op::kHas}, {"~", Op::kMatch}};
    for (const auto& [text, o] : kOps) {
      if (sc_.StartsWith(text)) {
        sc_.Advance(text.size());
        *op = o;
        return true;
      }
    }
    return false;
  }

  // term := key operator value | key ('=' | ':') '(' value ... ')'
  Result<NodeRef> Term() {
    size_t key_at = sc_.pos();
    std::string key;
    while (!sc_.AtEnd() && !std::isspace(static_cast<unsigned char>(sc_.Peek())) &&
           std::string_view("=!<>:~()").find(sc_.Peek()) == std::string_view::npos)
      key += sc_.Peek(), sc_.Advance();
    auto n = std::make_shared<Node>();
    if (key.empty()) {
      return sc_.Error("expected a key such as state, displayName or labels.team, got '" +
                       std::string(1, sc_.Peek()) + "'");
    }
    if (!ParsePath(key, &n->path)) {
      return sc_.ErrorAt(key_at, "'" + key +
                                     "' is not a resource key; write a dotted path such "
                                     "as labels.team or jobSpec.workerPoolSpecs[0]");
    }
    sc_.SkipSpace();
    size_t op_at = sc_.pos();
    Op op;
    if (!ReadOp(&op)) {
      return sc_.Error("expected an operator (" + std::string(kOperators) + ") after '" + key +
                       "', e.g. " + key + "=VALUE or " + key + ":*");
    }
    std::string op_text = text_.substr(op_at, sc_.pos() - op_at);
    sc_.SkipSpace();
    n->op = op == Op::kNe ? Op::kEq : op == Op::kNoMatch ? Op::kMatch : op;
    if (sc_.Peek() == '(' && (op == Op::kEq || op == Op::kHas)) {
      size_t open = sc_.pos();
      sc_.Advance();
      for (;;) {
        while (!sc_.AtEnd() &&
               (std::isspace(static_cast<unsigned char>(sc_.Peek())) || sc_.Peek() == ','))
          sc_.Advance();
        if (sc_.Eat(')')) break;
        if (sc_.AtEnd()) return sc_.ErrorAt(open, "'(' of the value list is not closed; add ')'");
        STOKER_ASSIGN_OR_RETURN(std::string v, sc_.Value(",()", true));
        n->values.push_back(std::move(v));
      }
      if (n->values.empty()) return sc_.ErrorAt(open, "expected values inside '()'");
    } else {
      size_t value_at = sc_.pos();
      bool quoted = false;
      STOKER_ASSIGN_OR_RETURN(std::string v, sc_.Value("()", true, &quoted));
      if (v.empty() && !quoted) {
        return sc_.ErrorAt(value_at, "expected a value after '" + key + op_text + "', e.g. " + key +
                                         op_text + "\"some value\"");
      }
      if (n->op == Op::kMatch) {
        try {
          n->re = std::make_shared<const std::regex>(v, std::regex::ECMAScript);
        } catch (const std::regex_error& e) {
          return sc_.ErrorAt(value_at, "'" + v + "' is not a regular expression (" + e.what() +
                                           "); escape special characters with '\\'");
        }
      }
      n->values.push_back(std::move(v));
    }
    NodeRef term = n;
    if (op == Op::kNe || op == Op::kNoMatch) {
      auto neg = std::make_shared<Node>();
      neg->kind = Node::Kind::kNot;
      neg->kids.push_back(term);
      return NodeRef(neg);
    }
    return term;
  }

  const std::string& text_;
  Scanner sc_;
  int depth_ = 0;
};

struct SortKey {
  std::vector<Segment> path;
  bool descending = false;
};

Result<std::vector<SortKey>> ParseSortBy(const std::string& text) {
  std::vector<SortKey> keys;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string part = text.substr(start, comma == std::string::npos ? comma : comma - start);
    start = comma == std::string::npos ? text.size() + 1 : comma + 1;
    size_t b = part.find_first_not_of(" \t"), e = part.find_last_not_of(" \t");
    part = b == std::string::npos ? "" : part.substr(b, e - b + 1);
    if (part.empty() && text.find_first_not_of(" \t,") == std::string::npos) break;
    SortKey k;
    if (!part.empty() && part[0] == '~') {
      k.descending = true;
      part.erase(0, 1);
    }
    if (!ParsePath(part, &k.path)) {
      return InvalidArgument("--sort-by: '" + part +
                             "' is not a resource key; write --sort-by=createTime or "
                             "--sort-by=~createTime,displayName ('~' sorts descending)");
    }
    keys.push_back(std::move(k));
  }
  return keys;
}

Status CheckCount(const char* flag, const std::optional<int64_t>& n) {
  if (n && *n < 1) {
    return InvalidArgument(std::string(flag) + ": must be 1 or more, got " + std::to_string(*n) +
                           "; leave " + flag + " out for no bound");
  }
  return OkStatus();
}

}  // namespace

bool ResourceFilter::Matches(const json& resource) const {
  return root_ == nullptr || Evaluate(*root_, resource);
}

Result<ResourceFilter> ParseResourceFilter(const std::string& text) {
  if (text.size() > kMaxFilterText) {
    return InvalidArgument("--filter: is " + std::to_string(text.size()) +
                           " characters long; at most " + std::to_string(kMaxFilterText) +
                           " are accepted");
  }
  ResourceFilter f;
  if (text.find_first_not_of(" \t\r\n") == std::string::npos) return f;
  FilterParser p(text);
  STOKER_ASSIGN_OR_RETURN(f.root_, p.Parse());
  return f;
}

Status ValidateListFlags(const ListFlags& flags) {
  STOKER_RETURN_IF_ERROR(CheckCount("--limit", flags.limit));
  STOKER_RETURN_IF_ERROR(CheckCount("--page-size", flags.page_size));
  STOKER_ASSIGN_OR_RETURN(ResourceFilter unused_filter, ParseResourceFilter(flags.filter));
  STOKER_ASSIGN_OR_RETURN(std::vector<SortKey> unused_keys, ParseSortBy(flags.sort_by));
  return OkStatus();
}

Result<std::vector<json>> ApplyListFlags(std::vector<json> items, const ListFlags& flags) {
  STOKER_RETURN_IF_ERROR(CheckCount("--limit", flags.limit));
  STOKER_RETURN_IF_ERROR(CheckCount("--page-size", flags.page_size));
  STOKER_ASSIGN_OR_RETURN(ResourceFilter filter, ParseResourceFilter(flags.filter));
  STOKER_ASSIGN_OR_RETURN(std::vector<SortKey> keys, ParseSortBy(flags.sort_by));
  if (!keys.empty()) {
    std::stable_sort(items.begin(), items.end(), [&](const json& a, const json& b) {
      for (const SortKey& k : keys) {
        int cmp = CompareValues(Lookup(a, k.path, 0), Lookup(b, k.path, 0));
        if (k.descending) cmp = -cmp;
        if (cmp != 0) return cmp < 0;
      }
      return false;
    });
  }
  std::vector<json> out;
  for (json& r : items) {
    if (flags.limit && static_cast<int64_t>(out.size()) >= *flags.limit) break;
    if (filter.Matches(r)) out.push_back(std::move(r));
  }
  return out;
}

}  // namespace stoker::cli
