// Which nodes of a host file still answer. When a job's collective times out,
// the launcher asks every node of its host file, from where mpirun runs,
// whether it answers a TCP connection at all: a refused connection answers
// (the node is up and reachable, nothing listens on the port), while no route
// or silence until the deadline means the node is lost to this one. This
// names the node a user must look at, which the ranks themselves cannot: they
// see only that a collective of their group did not finish.
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace tessel::dist {

// The hosts of an Open MPI host file, in order, once each: the first word of
// every line that is not blank or a comment ("node1 slots=2" -> "node1";
// "user@node1" -> "node1"). Throws tessel::UsageError naming the line for a
// line whose first word is not a host name or address.
std::vector<std::string> hostfile_hosts(const std::string& text);

struct HostAnswer {
  std::string host;
  bool answered = false;  // connected, or refused: the node is there
  std::string detail;     // "connection refused", "no route to host", "no answer within 3 s"
};

// Tries a TCP connection to `port` of every host at once and waits at most
// `timeout` for them all. A host whose name does not resolve counts as not
// answering, with the resolver's message as its detail.
std::vector<HostAnswer> probe_hosts(const std::vector<std::string>& hosts, int port,
                                    std::chrono::milliseconds timeout);

}  // namespace tessel::dist
