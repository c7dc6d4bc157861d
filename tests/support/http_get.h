// One HTTP GET to 127.0.0.1:port over a fresh connection, for tests of the
// coordinator's HTTP side.
#pragma once

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

namespace tune::testing {

// The whole response (status line, headers, body); "" when nobody answers.
inline std::string HttpGet(int port, const std::string& path) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(s, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    close(s);
    return "";
  }
  const std::string req = "GET " + path + " HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n";
  (void)!write(s, req.data(), req.size());
  std::string resp;
  char buf[65536];
  ssize_t n;
  while ((n = read(s, buf, sizeof buf)) > 0) resp.append(buf, n);
  close(s);
  return resp;
}

// The unlabelled series `name` of a /metrics page, or -1 when it has none.
inline double MetricValue(const std::string& metrics, const std::string& name) {
  const size_t at = metrics.find("\n" + name + " ");
  if (at == std::string::npos) return -1;
  return std::stod(metrics.substr(at + name.size() + 2));
}

}  // namespace tune::testing
