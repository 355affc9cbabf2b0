#include "exec/slurm_client.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <sstream>

#include "common/strings.h"
#include "exec/command.h"

namespace stoker::exec {
namespace {

// RunCommand for the Slurm client commands.
Result<CommandResult> RunSlurm(const std::vector<std::string>& args, double timeout_seconds) {
  return RunCommand(args, timeout_seconds,
                    " (is the Slurm client installed and in stokerd's PATH?)");
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), ::isdigit);
}

std::string CurrentUser() {
  if (passwd* pw = ::getpwuid(::geteuid())) return pw->pw_name;
  return std::to_string(::geteuid());
}

std::string Brief(const CommandResult& r) {
  std::string text = TrimSpace(r.err.empty() ? r.out : r.err);
  return text.empty() ? "exit status " + std::to_string(r.exit_code) : text;
}

}  // namespace

Result<SbatchResult> CommandSlurmClient::Submit(const std::filesystem::path& script,
                                                const std::vector<std::string>& extra_args) {
  std::vector<std::string> args = {"sbatch", "--parsable"};
  for (const std::string& a : extra_args) args.push_back(a);
  args.push_back(script.string());
  STOKER_ASSIGN_OR_RETURN(CommandResult r, RunSlurm(args, 60));
  std::string id = TrimSpace(r.out.substr(0, r.out.find(';')));  // "<id>[;<cluster>]"
  if (r.exit_code != 0 || !AllDigits(id)) return SbatchResult{0, Brief(r)};
  return SbatchResult{std::stoll(id), ""};
}

Result<std::map<int64_t, SlurmJobInfo>> CommandSlurmClient::Queue() {
  // -t all: jobs that ended recently (slurmctld keeps them MinJobAge seconds)
  // are listed too, with their final state and reason.
  STOKER_ASSIGN_OR_RETURN(CommandResult r,
                          RunSlurm({"squeue", "--noheader", "--states=all", "--user", CurrentUser(),
                                    std::string("--Format=") + kSqueueFormat},
                                   30));
  if (r.exit_code != 0) return Unavailable("squeue failed: " + Brief(r));
  return ParseSqueue(r.out);
}

Result<std::vector<int64_t>> CommandSlurmClient::FindJobs(const std::string& name,
                                                          const std::string& comment) {
  STOKER_ASSIGN_OR_RETURN(
      CommandResult r,
      RunSlurm({"squeue", "--noheader", "--states=all", "--name", name, "--format=%i|%k"}, 30));
  if (r.exit_code != 0) return Unavailable("squeue failed: " + Brief(r));
  std::vector<int64_t> out;
  std::istringstream in(r.out);
  std::string line;
  while (std::getline(in, line)) {
    size_t bar = line.find('|');
    if (bar == std::string::npos || TrimSpace(line.substr(bar + 1)) != comment) continue;
    std::string id = TrimSpace(line.substr(0, bar));
    if (AllDigits(id)) out.push_back(std::stoll(id));
  }
  return out;
}

Status CommandSlurmClient::Cancel(int64_t id, bool graceful) {
  std::vector<std::string> args = {"scancel"};
  // Without --full the signal goes to the job's steps (the supervisors), not
  // to the batch shell: srun must stay to collect them.
  if (graceful) args.push_back("--signal=TERM");
  args.push_back(std::to_string(id));
  STOKER_ASSIGN_OR_RETURN(CommandResult r, RunSlurm(args, 30));
  // A job that already ended is what cancel wants: not an error.
  if (r.exit_code != 0 && r.err.find("completed") == std::string::npos &&
      r.err.find("Invalid job id") == std::string::npos) {
    return Unavailable("scancel " + std::to_string(id) + " failed: " + Brief(r));
  }
  return OkStatus();
}

// "type:0|": the field whole (no padding, no truncation), then the bar.
const char kSqueueFormat[] = "JobID:0|,State:0|,Reason:0|,NodeList:0|,PreemptTime:0|,Partition:0";

std::map<int64_t, SlurmJobInfo> ParseSqueue(const std::string& text) {
  std::map<int64_t, SlurmJobInfo> jobs;
  std::istringstream in(text);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f;
    size_t start = 0;
    for (size_t bar; (bar = line.find('|', start)) != std::string::npos; start = bar + 1)
      f.push_back(line.substr(start, bar - start));
    f.push_back(line.substr(start));
    if (f.size() < 3) continue;
    std::string id = TrimSpace(f[0]);
    if (id.empty() || !std::all_of(id.begin(), id.end(), ::isdigit)) continue;
    auto field = [&](size_t i) { return i < f.size() ? TrimSpace(f[i]) : std::string(); };
    SlurmJobInfo info{field(1), field(2), field(3), field(4), field(5)};
    if (info.preempt_time == "N/A" || info.preempt_time == "None" ||
        info.preempt_time == "Unknown") {
      info.preempt_time.clear();
    }
    jobs[std::stoll(id)] = std::move(info);
  }
  return jobs;
}

bool SlurmPreempted(const SlurmJobInfo& info) {
  return info.state.rfind("PREEMPTED", 0) == 0 || !info.preempt_time.empty();
}

bool SlurmStateIsFinal(const std::string& state) {
  static const char* kFinal[] = {"COMPLETED", "FAILED",        "CANCELLED",   "TIMEOUT",
                                 "NODE_FAIL", "OUT_OF_MEMORY", "BOOT_FAIL",   "DEADLINE",
                                 "PREEMPTED", "REVOKED",       "SPECIAL_EXIT"};
  return std::any_of(std::begin(kFinal), std::end(kFinal),
                     [&](const char* s) { return state.rfind(s, 0) == 0; });
}

}  // namespace stoker::exec
