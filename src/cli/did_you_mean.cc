#include "cli/did_you_mean.h"

#include <algorithm>

#include "cli/output_format.h"

namespace stoker::cli {

namespace {

// The words of `args` that name commands: the deepest known command, and the
// first word under it that is neither one of its commands nor a flag.
struct UnknownWord {
  const CLI::App* app = nullptr;
  std::string word;
  std::string path;  // "stoker jobs"
};

UnknownWord FindUnknownWord(const CLI::App& app, const std::vector<std::string>& args) {
  UnknownWord u{&app, "", "stoker"};
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--") break;
    if (a.rfind("-", 0) == 0) {
      if (a.find('=') == std::string::npos && i + 1 < args.size()) {
        // A flag that takes a value swallows the next word.
        try {
          const CLI::Option* o = u.app->get_option_no_throw(a);
          if (o == nullptr) o = app.get_option_no_throw(a);
          if (o != nullptr && o->get_type_size() != 0) ++i;
        } catch (const CLI::Error&) {
        }
      }
      continue;
    }
    const CLI::App* sub = nullptr;
    for (const CLI::App* s : u.app->get_subcommands({})) {
      if (s->check_name(a)) sub = s;
    }
    if (sub == nullptr) {
      if (!u.app->get_subcommands({}).empty() && u.word.empty()) u.word = a;
      return u;
    }
    u.app = sub;
    u.path += " " + a;
  }
  return u;
}

std::string UnknownCommand(const UnknownWord& u) {
  std::vector<std::string> commands;
  for (const CLI::App* s : u.app->get_subcommands({})) commands.push_back(s->get_name());
  std::string best = Suggest(u.word, commands);
  std::string all;
  for (const std::string& c : commands) all += (all.empty() ? "" : ", ") + c;
  return "'" + u.word + "' is not a command of '" + u.path + "'" +
         (best.empty() ? "" : "; did you mean '" + best + "'?") + " (commands: " + all + ")";
}

// The first --word that no command on the path knows, or "" when none.
std::string UnknownFlag(const UnknownWord& u, const std::vector<std::string>& args) {
  std::vector<std::string> flags;
  for (const CLI::App* a = u.app; a != nullptr; a = a->get_parent()) {
    for (const CLI::Option* o : a->get_options()) {
      for (const std::string& n : o->get_lnames()) flags.push_back("--" + n);
    }
  }
  for (const std::string& a : args) {
    if (a == "--") break;
    if (a.rfind("--", 0) != 0) continue;
    std::string flag = a.substr(0, a.find('='));
    if (std::find(flags.begin(), flags.end(), flag) != flags.end()) continue;
    std::string best = Suggest(flag, flags);
    return "unrecognized argument '" + flag + "' for '" + u.path + "'" +
           (best.empty() ? "" : "; did you mean '" + best + "'?") + " (see " + u.path + " --help)";
  }
  return "";
}

}  // namespace

std::string DidYouMean(const CLI::App& app, const std::vector<std::string>& args,
                       const CLI::ParseError& e) {
  UnknownWord u = FindUnknownWord(app, args);
  if (!u.word.empty()) return UnknownCommand(u);
  if (std::string(e.what()).find("not expected") == std::string::npos) return "";
  return UnknownFlag(u, args);
}

}  // namespace stoker::cli
