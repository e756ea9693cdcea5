// The nodes of the SLURM allocation a job runs in, for naming a lost node
// when the job has no host file: inside an allocation mpirun takes its nodes
// from SLURM's environment, so `tessel run` asks SLURM (`scontrol show node`)
// for the nodes' names and the addresses its daemons use (NodeAddr: a node
// name need not resolve in DNS, its address is what the job's traffic used).
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace tessel::dist {

struct AllocationNode {
  std::string name;     // SLURM's NodeName, e.g. "node1"
  std::string address;  // its NodeAddr (the name itself where SLURM has no other)
};

// The nodes in `scontrol show node -o` output: one line per node of
// space-separated KEY=VALUE fields ("NodeName=node1 Arch=x86_64 ...
// NodeAddr=10.213.0.2 NodeHostName=node1 ..."); lines without a NodeName are
// skipped. A node without NodeAddr is reached by its name.
std::vector<AllocationNode> parse_scontrol_nodes(const std::string& text);

// The nodes of $SLURM_JOB_NODELIST, from `scontrol show node -o LIST` run
// with at most `timeout` to answer (a controller that does not answer must
// not hold up a failing job's closing line). Empty outside an allocation;
// empty with the reason in `why` when scontrol is missing, fails or times out.
std::vector<AllocationNode> slurm_allocation_nodes(std::chrono::milliseconds timeout, std::string& why);

}  // namespace tessel::dist
