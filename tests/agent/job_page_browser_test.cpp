// The job page of a running 2-node job (c10d on loopback, a job secret), opened by a real
// headless Chromium: the rendered DOM shows both nodes and all 4 ranks with step counts that
// advance, a node whose name holds HTML shows it as text, pressing "capture stacks" shows the
// workers' stack with their function, the token is required, and the other node's port
// redirects to node 0's page. A screenshot is kept in the build folder (test-artifacts/).

#include <unistd.h>

#include <catch2/catch.hpp>
#include <regex>
#include <set>

#include "tests/agent/e2e_support.hpp"
#include "tests/agent/http_client.hpp"
#include "tests/skip_test.hpp"

namespace {

using namespace std::chrono_literals;
using namespace ddprun::agent::e2e;

// Beats on the heartbeat descriptor every 50 ms, in a named function the stacks show.
constexpr const char* kWorker =
    "import os, sys, time\n"
    "def wait_for_go(go):\n"
    "    while not os.path.exists(go):\n"
    "        os.write(int(os.environ['DDPRUN_HEARTBEAT_FD']), b'.')\n"
    "        time.sleep(0.05)\n"
    "os.write(1, ('rank %s started\\n' % os.environ['RANK']).encode())\n"
    "wait_for_go(sys.argv[1])\n";

// The second node's host name: markup a page that wrote it as HTML would run.
const std::string kHtmlName = "<i>b</i><img src=x onerror=alert(1)>";

std::optional<std::string> chromium_path() {
  for (const char* name : {"chromium", "chromium-browser"}) {
    for (const char* dir : {"/usr/bin", "/usr/local/bin"}) {
      const std::string path = std::string(dir) + "/" + name;
      if (::access(path.c_str(), X_OK) == 0)
        return path;
    }
  }
  return std::nullopt;
}

// Runs headless Chromium on url with `mode` (--dump-dom or --screenshot=...); its output.
std::string chromium(const std::string& browser, const TempDir& dir, const std::string& url,
                     const std::string& mode, const std::string& name) {
  Process run({browser, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
               "--user-data-dir=" + (dir / ("profile-" + name)), "--window-size=1280,1000",
               "--virtual-time-budget=4000", mode, url},
              dir / (name + ".out"));
  REQUIRE(run.wait_exit(90s) == 0);
  return run.output();
}

// The rows of the rendered ranks table: rank -> its steps cell.
std::map<int, long> steps_by_rank(const std::string& dom) {
  std::map<int, long> steps;
  const std::regex row(R"re(<tr data-rank="(\d+)">(.*?)</tr>)re");
  const std::regex cell(R"re(<td class="num steps">(\d+)</td>)re");
  for (auto it = std::sregex_iterator(dom.begin(), dom.end(), row); it != std::sregex_iterator();
       ++it) {
    const std::string cells = (*it)[2];
    std::smatch match;
    if (std::regex_search(cells, match, cell))
      steps[std::stoi((*it)[1])] = std::stol(match[1]);
  }
  return steps;
}

}  // namespace

TEST_CASE("the job page in a real browser: 2 nodes, 4 ranks, stacks, its token, names as text",
          "[job_page][browser]") {
  const auto browser = chromium_path();
  if (!browser)
    skip_test("no Chromium (Debian's chromium package; install-deps.sh --tests installs it)");
  if (::geteuid() != 0)
    skip_test("the second node's host name needs a UTS namespace of its own (root)");
  TempDir dir;
  write_file(dir / "worker.py", kWorker);
  const std::string go = dir / "go";
  const uint16_t store_port = free_port();
  const uint16_t page_port = free_port("0.0.0.0");
  const uint16_t other_port = free_port("0.0.0.0");
  const std::string secret = "job-page-test-secret";
  std::vector<std::unique_ptr<Process>> agents;
  for (int node = 0; node < 2; ++node) {
    std::vector<std::string> argv = {ddprun_binary(),
                                     "--nnodes",
                                     "2",
                                     "--nproc-per-node",
                                     "2",
                                     "--rdzv-backend",
                                     "c10d",
                                     "--rdzv-endpoint",
                                     "127.0.0.1:" + std::to_string(store_port),
                                     "--rdzv-id",
                                     "page_job",
                                     "--rdzv-conf",
                                     kFastRdzv,
                                     "--node_rank",
                                     std::to_string(node),
                                     "--watchdog-timeout",
                                     "120",
                                     "--log-dir",
                                     dir / ("logs" + std::to_string(node))};
    if (node == 0) {
      argv.insert(argv.end(), {"--local_addr", "127.0.0.1"});
    } else {
      // Its own host name, set in a UTS namespace of its own before ddprun starts.
      argv.insert(argv.begin(), {"/usr/bin/unshare", "--uts", reference_python(), "-c",
                                 "import os, socket, sys; socket.sethostname(sys.argv[1]); "
                                 "os.execv(sys.argv[2], sys.argv[2:])",
                                 kHtmlName});
    }
    argv.insert(argv.end(), {dir / "worker.py", go});
    agents.push_back(std::make_unique<Process>(
        argv, dir / ("agent" + std::to_string(node) + ".out"),
        std::map<std::string, std::string>{{"PYTHON_EXEC", reference_python()},
                                           {"DDPRUN_RDZV_SECRET", secret},
                                           {"TORCHELASTIC_HEALTH_CHECK_PORT",
                                            std::to_string(node == 0 ? page_port : other_port)}}));
  }
  for (int node = 0; node < 2; ++node) {
    INFO(agents[static_cast<std::size_t>(node)]->output());
    REQUIRE(wait_for_file(
        dir / ("agent" + std::to_string(node) + ".out"),
        [](const std::string& text) {
          return std::regex_search(text, std::regex("started[^]*started"));
        },
        90s));
  }
  // The URL node 0 printed, with the token derived from the secret.
  const std::string out0 = agents[0]->output();
  std::smatch printed;
  REQUIRE(std::regex_search(out0, printed,
                            std::regex(R"(job page: (http://\S+:(\d+)/job/\?token=([0-9a-f]+)))")));
  const std::string url = printed[1];
  const std::string token = printed[3];
  CHECK(std::stoi(printed[2]) == page_port);
  CHECK(out0.find(secret) == std::string::npos);

  // Without the token, or with a wrong one: refused.
  for (const std::string& target :
       {std::string("/job/"), std::string("/job/api/state"), "/job/api/state?token=" + token + "0",
        std::string("/job/api/state?token=")}) {
    INFO(target);
    const auto refused = http_exchange(page_port, "GET " + target + " HTTP/1.0\r\n\r\n");
    REQUIRE(refused);
    CHECK(refused->status == 401);
  }
  // The other node's port sends the browser to node 0's page (once node 0 said where it is).
  std::optional<HttpReply> redirect;
  for (const auto deadline = Clock::now() + 30s; Clock::now() < deadline;) {
    redirect = http_exchange(other_port, "GET /job/?token=" + token + " HTTP/1.0\r\n\r\n");
    if (redirect && redirect->status == 302)
      break;
    std::this_thread::sleep_for(100ms);
  }
  REQUIRE(redirect);
  CHECK(redirect->status == 302);
  CHECK_THAT(redirect->head, Catch::Contains("Location: http://127.0.0.1:" +
                                             std::to_string(page_port) + "/job/?token=" + token));

  // The page: both nodes, all ranks, steps that advance. The other node's record comes once the
  // page's API has been asked for (which asks node 1 for it), so the API is polled until it is
  // there, then the page is read.
  const auto api_steps = [&] {
    std::map<int, long> steps;
    const auto state =
        http_exchange(page_port, "GET /job/api/state?token=" + token + " HTTP/1.0\r\n\r\n");
    if (!state || !state->body.is_object())
      return steps;
    for (const auto& node : state->body["nodes"])
      for (const auto& rank : node.value("ranks", nlohmann::json::array()))
        steps[rank["rank"].get<int>()] = rank["steps"].get<long>();
    return steps;
  };
  for (const auto deadline = Clock::now() + 60s; api_steps().size() < 4 && Clock::now() < deadline;)
    std::this_thread::sleep_for(200ms);
  const std::string dom = chromium(*browser, dir, url, "--dump-dom", "dom");
  const auto first = steps_by_rank(dom);
  INFO(dom);
  REQUIRE(first.size() == 4);
  CHECK(std::regex_search(dom, std::regex("<td>page_job</td>|page_job")));
  const std::regex node_row(R"(<tr><td>[01]</td><td>)");
  CHECK(std::distance(std::sregex_iterator(dom.begin(), dom.end(), node_row),
                      std::sregex_iterator()) == 2);
  // The name is text: escaped in the DOM, never an element.
  CHECK(dom.find("&lt;i&gt;b&lt;/i&gt;&lt;img src=x onerror=alert(1)&gt;") != std::string::npos);
  CHECK(dom.find("<img src=\"x\"") == std::string::npos);
  CHECK(dom.find("<i>b</i>") == std::string::npos);
  // Once the API says every rank moved on (node 1's record is refreshed every 2 s while the page
  // is looked at), the page shows it too.
  const auto advanced = [&](const std::map<int, long>& later) {
    for (const auto& [rank, steps] : first)
      if (!later.contains(rank) || later.at(rank) <= steps)
        return false;
    return true;
  };
  for (const auto deadline = Clock::now() + 60s; !advanced(api_steps()) && Clock::now() < deadline;)
    std::this_thread::sleep_for(200ms);
  const auto later = steps_by_rank(chromium(*browser, dir, url, "--dump-dom", "again"));
  for (const auto& [rank, steps] : first) {
    INFO("rank " << rank);
    REQUIRE(later.contains(rank));
    CHECK(later.at(rank) > steps);
  }

  // Pressing "capture stacks" in the page: every rank's stack, grouped, names the function.
  chromium(*browser, dir, url + "&press=stacks", "--dump-dom", "press");
  std::optional<HttpReply> stacks;
  for (const auto deadline = Clock::now() + 60s; Clock::now() < deadline;) {
    stacks = http_exchange(page_port, "GET /job/api/stacks?token=" + token + " HTTP/1.0\r\n\r\n");
    if (stacks && stacks->body.is_object() && stacks->body.value("phase", "") != "capturing" &&
        stacks->body.value("phase", "") != "none")
      break;
    std::this_thread::sleep_for(200ms);
  }
  REQUIRE(stacks);
  INFO(stacks->text);
  REQUIRE(stacks->body.value("phase", "") == "done");
  const std::string shown = chromium(*browser, dir, url, "--dump-dom", "stacks");
  INFO(shown);
  CHECK(std::regex_search(shown, std::regex(R"(<pre>[^<]*wait_for_go)")));
  CHECK(std::regex_search(shown, std::regex(R"(ranks 0-3 \(4\))")));
  const std::string artifacts = std::string(DDPRUN_BIN_DIR) + "/../test-artifacts";
  fs::create_directories(artifacts);
  chromium(*browser, dir, url, "--screenshot=" + artifacts + "/job-page.png", "screenshot");
  CHECK(fs::file_size(artifacts + "/job-page.png") > 10000);

  write_file(go, "");
  for (auto& agent : agents) {
    INFO(agent->output());
    CHECK(agent->wait_exit(60s) == 0);
  }
}
