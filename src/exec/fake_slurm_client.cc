#include "exec/fake_slurm_client.h"

#include <fstream>
#include <sstream>

namespace stoker::exec {

Result<SbatchResult> FakeSlurmClient::Submit(const std::filesystem::path& script,
                                             const std::vector<std::string>&) {
  ++submits_;
  if (fail_next_) {
    Status s = *fail_next_;
    fail_next_.reset();
    return s;
  }
  if (refuse_next_) {
    SbatchResult r{0, *refuse_next_};
    refuse_next_.reset();
    return r;
  }
  Job job;
  job.script = script;
  std::ifstream in(script);
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("#SBATCH --job-name=", 0) == 0) job.name = line.substr(19);
    if (line.rfind("#SBATCH --comment=", 0) == 0) job.comment = line.substr(18);
    if (line.rfind("#SBATCH --partition=", 0) == 0) job.info.partition = line.substr(20);
  }
  int64_t id = next_id_++;
  jobs_[id] = std::move(job);
  return SbatchResult{id, ""};
}

Result<std::map<int64_t, SlurmJobInfo>> FakeSlurmClient::Queue() {
  ++queue_calls_;
  std::map<int64_t, SlurmJobInfo> out;
  for (const auto& [id, job] : jobs_) out[id] = job.info;
  return out;
}

Result<std::vector<int64_t>> FakeSlurmClient::FindJobs(const std::string& name,
                                                       const std::string& comment) {
  ++find_calls_;
  std::vector<int64_t> out;
  for (const auto& [id, job] : jobs_) {
    if (job.name == name && job.comment == comment) out.push_back(id);
  }
  return out;
}

Status FakeSlurmClient::Cancel(int64_t id, bool graceful) {
  cancels_.push_back({id, graceful});
  auto it = jobs_.find(id);
  if (it != jobs_.end() && !graceful) it->second.info.state = "CANCELLED";
  return OkStatus();
}

int64_t FakeSlurmClient::AddJob(const std::string& name, const std::string& comment) {
  int64_t id = next_id_++;
  jobs_[id] = Job{name, comment, "", {"PENDING", "Priority", ""}};
  return id;
}

void FakeSlurmClient::SetState(int64_t id, const std::string& state, const std::string& reason,
                               const std::string& nodes) {
  SlurmJobInfo& info = jobs_[id].info;  // the partition and PreemptTime stay
  info.state = state;
  info.reason = reason;
  info.nodes = nodes;
}

void FakeSlurmClient::Forget(int64_t id) { jobs_.erase(id); }

}  // namespace stoker::exec
