#include "runner/fingerprint/node_layout.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <set>

#include "runner/common/error.hpp"
#include "runner/runtime/runtime.hpp"

namespace runner {

std::string rank_place_json(const RankPlace& place) {
  return nlohmann::json{{"rank", place.rank},
                        {"host", place.host},
                        {"node", place.node},
                        {"local_rank", place.local_rank},
                        {"local_world_size", place.local_world_size}}
      .dump();
}

RankPlace rank_place_from_json(const std::string& json) {
  try {
    const nlohmann::json j = nlohmann::json::parse(json);
    RankPlace place;
    place.rank = j.at("rank").get<int>();
    place.host = j.at("host").get<std::string>();
    place.node = j.value("node", -1);
    place.local_rank = j.value("local_rank", -1);
    place.local_world_size = j.value("local_world_size", -1);
    return place;
  } catch (const nlohmann::json::exception& e) {
    throw Error("a rank published an unreadable place in the job's store: " + json + " (" +
                    e.what() + ")",
                "run the same runner version on every node", ErrorKind::run);
  }
}

std::map<std::string, std::string> job_layout_fields(const std::vector<RankPlace>& places,
                                                     int world_size) {
  // A node is the launcher's node rank; without one, the host stands for it.
  struct Node {
    std::string host;
    std::vector<int> ranks;
    int local_world_size = -1;
  };
  std::vector<RankPlace> sorted = places;
  std::sort(sorted.begin(), sorted.end(),
            [](const RankPlace& a, const RankPlace& b) { return a.rank < b.rank; });
  std::map<int, Node> by_rank;         // launcher's node rank -> node
  std::vector<Node> by_host;           // in the order of their first rank
  std::set<int> reported;
  for (const RankPlace& p : sorted) {
    reported.insert(p.rank);
    Node* node = nullptr;
    if (p.node >= 0) {
      node = &by_rank[p.node];
    } else {
      const auto it = std::find_if(by_host.begin(), by_host.end(),
                                   [&](const Node& n) { return n.host == p.host; });
      node = it != by_host.end() ? &*it : &by_host.emplace_back();
    }
    if (node->host.empty()) {
      node->host = p.host;
    } else if (node->host.find(p.host) == std::string::npos) {
      node->host += " " + p.host;  // a node rank on two hosts: say so, do not hide it
    }
    node->ranks.push_back(p.rank);
    if (p.local_world_size >= 0) node->local_world_size = p.local_world_size;
  }
  std::vector<Node> nodes;
  for (auto& [rank, node] : by_rank) nodes.push_back(std::move(node));
  for (auto& node : by_host) nodes.push_back(std::move(node));
  std::map<std::string, std::string> f;
  f["job.world_size"] = std::to_string(world_size);
  f["job.nodes"] = std::to_string(nodes.size());
  for (std::size_t n = 0; n < nodes.size(); ++n) {
    const Node& node = nodes[n];
    const int local = node.local_world_size >= 0 ? node.local_world_size
                                                 : static_cast<int>(node.ranks.size());
    f["job.node." + std::to_string(n)] = "host " + node.host + ", ranks " +
                                         format_cpu_list(node.ranks) + ", local world size " +
                                         std::to_string(local);
  }
  std::vector<int> missing;
  for (int r = 0; r < world_size; ++r)
    if (reported.count(r) == 0) missing.push_back(r);
  if (!missing.empty()) f["job.unreported_ranks"] = format_cpu_list(missing);
  return f;
}

}  // namespace runner
