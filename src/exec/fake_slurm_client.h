// FakeSlurmClient: an in-memory Slurm for SlurmExecutor's unit tests. Jobs
// get ids from 100 up in submission order and stay PENDING until the test
// changes them; a plain Cancel makes a job CANCELLED, a graceful one only
// records the call (the steps got SIGTERM; the job ends when the test says).
// Every call is counted. Not thread-safe (as the executor's caller).
#pragma once

#include <optional>

#include "exec/slurm_client.h"

namespace stoker::exec {

class FakeSlurmClient : public SlurmClient {
 public:
  struct Job {
    std::string name, comment;  // from the script's #SBATCH lines (--partition: info)
    std::filesystem::path script;
    SlurmJobInfo info{"PENDING", "Priority", ""};
  };
  struct CancelCall {
    int64_t id;
    bool graceful;
  };

  Result<SbatchResult> Submit(const std::filesystem::path& script,
                              const std::vector<std::string>& extra_args) override;
  Result<std::map<int64_t, SlurmJobInfo>> Queue() override;
  Result<std::vector<int64_t>> FindJobs(const std::string& name,
                                        const std::string& comment) override;
  Status Cancel(int64_t id, bool graceful) override;

  // ---- test side ----
  // A job Slurm knows without this daemon having recorded it (submitted
  // right before a crash); returns its id.
  int64_t AddJob(const std::string& name, const std::string& comment);
  void SetState(int64_t id, const std::string& state, const std::string& reason = "None",
                const std::string& nodes = "");
  // Slurm began to preempt the job at `when` (squeue's PreemptTime); its
  // state stays what it was until SetState.
  void SetPreemptTime(int64_t id, const std::string& when) { jobs_[id].info.preempt_time = when; }
  void Forget(int64_t id);  // Slurm no longer lists it (past MinJobAge)
  // The next Submit returns `status` (e.g. a refusal: SbatchResult{0, "..."}
  // is returned by RefuseNextSubmit instead).
  void FailNext(Status status) { fail_next_ = std::move(status); }
  void RefuseNextSubmit(std::string why) { refuse_next_ = std::move(why); }

  std::map<int64_t, Job>& jobs() { return jobs_; }
  int submits() const { return submits_; }
  int queue_calls() const { return queue_calls_; }
  int find_calls() const { return find_calls_; }
  const std::vector<CancelCall>& cancels() const { return cancels_; }

 private:
  std::map<int64_t, Job> jobs_;
  int64_t next_id_ = 100;
  int submits_ = 0, queue_calls_ = 0, find_calls_ = 0;
  std::vector<CancelCall> cancels_;
  std::optional<Status> fail_next_;
  std::optional<std::string> refuse_next_;
};

}  // namespace stoker::exec
