#include "runner/slurm_task.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <thread>

#include "common/files.h"

namespace stoker::runner {
namespace {

namespace fs = std::filesystem;

// The node (host) that runs task `t` with block distribution.
Result<std::string> HostOfTask(const SlurmTask& task, int t) {
  int first = 0;
  for (size_t n = 0; n < task.tasks_per_node.size() && n < task.hosts.size(); ++n) {
    if (t < first + task.tasks_per_node[n]) return task.hosts[n];
    first += task.tasks_per_node[n];
  }
  return InvalidArgument("SLURM_STEP_TASKS_PER_NODE: places only " + std::to_string(first) +
                         " tasks on " + std::to_string(task.hosts.size()) + " node(s); task " +
                         std::to_string(t) + " has none");
}

}  // namespace

Result<PortReservation> PortReservation::Bind() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Unavailable(std::string("cannot reserve a port: socket: ") + strerror(errno));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_ANY);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    std::string why = strerror(errno);
    ::close(fd);
    return Unavailable("cannot reserve a port: bind: " + why);
  }
  // SO_REUSEADDR on the reservation lets the trainer's listening socket
  // (which sets it too, as torch's TCPStore and gRPC do) bind the port even
  // before the release; without it a bound socket blocks every other bind.
  // It is set after the bind: two sockets that both had it while binding
  // port 0 could be given the same port (two replicas on one host saw one
  // port in the Slurm contract test).
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  return PortReservation(fd, ntohs(addr.sin_port));
}

PortReservation::PortReservation(PortReservation&& other) noexcept
    : fd_(other.fd_), port_(other.port_) {
  other.fd_ = -1;
}

PortReservation& PortReservation::operator=(PortReservation&& other) noexcept {
  if (this != &other) {
    Release();
    fd_ = other.fd_;
    port_ = other.port_;
    other.fd_ = -1;
  }
  return *this;
}

void PortReservation::Release() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

fs::path SlurmPortDir(const fs::path& job_dir, int64_t slurm_job_id) {
  return job_dir / ("slurm-" + std::to_string(slurm_job_id) + "-ports");
}

Status PublishPort(const fs::path& port_dir, int task, int port) {
  STOKER_RETURN_IF_ERROR(MakeDirs(port_dir));
  // Not synced: the file matters only while the step runs.
  return WriteFileAtomic(port_dir / std::to_string(task), std::to_string(port) + "\n",
                         Durability::kNoSync);
}

Result<std::vector<int>> AwaitPorts(const fs::path& port_dir, int ntasks, double timeout_seconds,
                                    const std::function<bool()>& stop) {
  using Clock = std::chrono::steady_clock;
  const Clock::time_point deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000));
  std::vector<int> ports(ntasks, 0);
  auto delay = std::chrono::milliseconds(5);
  while (true) {
    std::vector<int> missing;
    for (int t = 0; t < ntasks; ++t) {
      if (ports[t] > 0) continue;
      fs::path file = port_dir / std::to_string(t);
      auto text = ReadFile(file);
      if (!text.ok()) {
        missing.push_back(t);
        continue;
      }
      int port = 0;
      char extra = 0;
      if (std::sscanf(text->c_str(), "%d %c", &port, &extra) != 1 || port <= 0 || port > 65535) {
        return InvalidArgument(file.string() + ": '" + *text + "' is not a port number");
      }
      ports[t] = port;
    }
    if (missing.empty()) return ports;
    if (stop && stop())
      return Status(Code::kCancelled, "stopped while waiting for the ports of the other tasks");
    if (Clock::now() >= deadline) {
      std::string list;
      for (int t : missing) list += (list.empty() ? "" : ", ") + std::to_string(t);
      return DeadlineExceeded(
          "task(s) " + list + " of " + std::to_string(ntasks) + " did not publish a port in " +
          port_dir.string() + " within " + std::to_string(static_cast<int>(timeout_seconds)) +
          " s: did stoker-run start on every node, and is the job directory the same shared "
          "directory on every node? (see the slurm-<id>.out of the job)");
    }
    std::this_thread::sleep_for(delay);
    delay = std::min(delay * 2, std::chrono::milliseconds(100));
  }
}

Result<std::vector<int>> ParseTasksPerNode(const std::string& text) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t comma = text.find(',', pos);
    std::string item =
        text.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    int count = 0, repeat = 1;
    char close = 0;
    int fields = std::sscanf(item.c_str(), "%d(x%d%c", &count, &repeat, &close);
    bool ok = (fields == 1 && item.find('(') == std::string::npos) || (fields == 3 && close == ')');
    if (!ok || count < 0 || repeat < 1) {
      return InvalidArgument("SLURM_STEP_TASKS_PER_NODE: cannot read '" + text + "'");
    }
    out.insert(out.end(), repeat, count);
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  if (out.empty()) return InvalidArgument("SLURM_STEP_TASKS_PER_NODE: empty");
  return out;
}

Result<std::string> SlurmReplica(const SlurmTask& task, const std::vector<std::string>& replicas) {
  if (task.ntasks != static_cast<int>(replicas.size())) {
    return InvalidArgument("SLURM_STEP_NUM_TASKS: the step has " + std::to_string(task.ntasks) +
                           " tasks but slurm.json lists " + std::to_string(replicas.size()) +
                           " replicas; run one task per replica");
  }
  if (task.procid < 0 || task.procid >= task.ntasks) {
    return InvalidArgument("SLURM_PROCID: " + std::to_string(task.procid) + " is not below " +
                           std::to_string(task.ntasks));
  }
  return replicas[task.procid];
}

Result<std::map<std::string, std::string>> SlurmTaskEnv(
    const std::map<std::string, std::string>& env,
    const std::optional<replica::ClusterTask>& cluster, const std::vector<std::string>& replicas,
    const SlurmTask& task) {
  STOKER_ASSIGN_OR_RETURN(std::string mine, SlurmReplica(task, replicas));
  if (task.ports.size() != replicas.size()) {
    return InvalidArgument("ports: " + std::to_string(task.ports.size()) + " task port(s) for " +
                           std::to_string(replicas.size()) + " replicas");
  }
  if (!cluster) {
    return InvalidArgument(
        "launch.json has no \"cluster\" (written by an older stokerd than this stoker-run): "
        "submit the job again");
  }
  if (replica::ReplicaName(cluster->pool, cluster->index) != mine) {
    return InvalidArgument("launch.json: cluster: names " +
                           replica::ReplicaName(cluster->pool, cluster->index) + " but task " +
                           std::to_string(task.procid) + " is " + mine + " in slurm.json");
  }
  replica::ClusterAddresses addresses;
  for (int t = 0; t < static_cast<int>(replicas.size()); ++t) {
    int pool = 0, index = 0;
    if (!replica::ParseReplicaName(replicas[t], &pool, &index)) {
      return InvalidArgument("slurm.json: replica '" + replicas[t] +
                             "' is not named workerpool<P>-<I>");
    }
    if (static_cast<size_t>(pool) >= addresses.size()) addresses.resize(pool + 1);
    if (static_cast<size_t>(index) != addresses[pool].size()) {
      return InvalidArgument("slurm.json: replica '" + replicas[t] +
                             "' is out of rank order (pool by pool, index by index)");
    }
    STOKER_ASSIGN_OR_RETURN(std::string host, HostOfTask(task, t));
    addresses[pool].push_back(host + ":" + std::to_string(task.ports[t]));
  }
  // Tasks on this node: the entry of the node that runs this task.
  int first = 0, local_world = 1, node = 0;
  for (; node < static_cast<int>(task.tasks_per_node.size()); ++node) {
    int n = task.tasks_per_node[node];
    if (task.procid < first + n) {
      local_world = n;
      break;
    }
    first += n;
  }
  replica::ClusterTask placed = *cluster;
  placed.local_rank = task.localid;
  placed.local_world_size = local_world;
  STOKER_ASSIGN_OR_RETURN(auto variables, replica::ClusterEnv(addresses, placed));
  if (variables["RANK"] != std::to_string(task.procid)) {
    return InvalidArgument("RANK: " + mine + " has rank " + variables["RANK"] +
                           " but is Slurm task " + std::to_string(task.procid) + " of " +
                           std::to_string(task.ntasks) +
                           "; slurm.json must list replicas in rank order");
  }
  std::map<std::string, std::string> out = env;
  for (auto& [k, v] : variables) out[k] = std::move(v);
  out["CUDA_VISIBLE_DEVICES"] = task.gpus;
  // Slurm's own view, consistent with the above (rank = task), for trainers
  // and frameworks that read it.
  out["SLURM_JOB_ID"] = std::to_string(task.job_id);
  out["SLURM_PROCID"] = std::to_string(task.procid);
  out["SLURM_LOCALID"] = std::to_string(task.localid);
  out["SLURM_NODEID"] = std::to_string(node);
  out["SLURM_NTASKS"] = std::to_string(task.ntasks);
  return out;
}

}  // namespace stoker::runner
