#include "cli/did_you_mean.h"

#include <gtest/gtest.h>

namespace stoker::cli {
namespace {

// A small tree like stoker's: `jobs list|logs` with flags, and a global --server.
class DidYouMeanTest : public ::testing::Test {
 protected:
  DidYouMeanTest() {
    app_.require_subcommand(1);
    app_.add_option("--server", server_, "URL");
    auto* jobs = app_.add_subcommand("jobs", "Jobs");
    jobs->require_subcommand(1);
    jobs->add_subcommand("list", "List");
    auto* logs = jobs->add_subcommand("logs", "Logs");
    logs->add_option("ID", id_)->required();
    logs->add_flag("--follow", follow_, "Follow");
    logs->add_option("--replica", replica_, "Replica");
    app_.add_subcommand("nodes", "Nodes");
  }

  // The hint for parsing `args` as main does, or "<parsed>" when it parses.
  std::string Hint(const std::vector<std::string>& args) {
    std::vector<std::string> reversed(args.rbegin(), args.rend());
    try {
      app_.parse(reversed);
    } catch (const CLI::ParseError& e) {
      return DidYouMean(app_, args, e);
    }
    return "<parsed>";
  }

  CLI::App app_{"test"};
  std::string server_, id_, replica_;
  bool follow_ = false;
};

TEST_F(DidYouMeanTest, NamesTheNearestCommandAtTheTop) {
  EXPECT_EQ(Hint({"jbos", "list"}),
            "'jbos' is not a command of 'stoker'; did you mean 'jobs'? (commands: jobs, nodes)");
}

TEST_F(DidYouMeanTest, NamesTheNearestSubcommandUnderItsParent) {
  EXPECT_EQ(Hint({"jobs", "lsit"}),
            "'lsit' is not a command of 'stoker jobs'; did you mean 'list'? (commands: list, "
            "logs)");
}

TEST_F(DidYouMeanTest, SkipsTheValueOfAFlagBeforeTheCommand) {
  EXPECT_EQ(Hint({"--server", "http://x", "jobs", "lsit"}),
            "'lsit' is not a command of 'stoker jobs'; did you mean 'list'? (commands: list, "
            "logs)");
}

TEST_F(DidYouMeanTest, ListsTheCommandsWhenNoneIsNear) {
  EXPECT_EQ(Hint({"jobs", "zzzzzzzz"}),
            "'zzzzzzzz' is not a command of 'stoker jobs' (commands: list, logs)");
}

TEST_F(DidYouMeanTest, NamesTheNearestFlagOfTheCommandOrItsParents) {
  EXPECT_EQ(Hint({"jobs", "logs", "7", "--folow"}),
            "unrecognized argument '--folow' for 'stoker jobs logs'; did you mean '--follow'? "
            "(see stoker jobs logs --help)");
  EXPECT_EQ(Hint({"jobs", "logs", "7", "--servr=http://x"}),
            "unrecognized argument '--servr' for 'stoker jobs logs'; did you mean '--server'? "
            "(see stoker jobs logs --help)");
}

TEST_F(DidYouMeanTest, SaysNothingAboutOtherErrors) {
  EXPECT_EQ(Hint({"jobs", "logs"}), "");  // ID is missing: CLI11's own message
  EXPECT_EQ(Hint({"jobs", "logs", "7"}), "<parsed>");
}

}  // namespace
}  // namespace stoker::cli
