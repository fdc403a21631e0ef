// Example: a program that links the fusiond SDK, checks the daemon's health and prints its
// device budget. Usage: fusion_sdk_example [SOCKET]. Exit 0 on success, 1 on any error.
#include <cstdio>

#include "fusion/client.h"

int main(int argc, char** argv) {
  fusion::ClientOptions options;
  if (argc > 1) options.socket = argv[1];
  auto client = fusion::Client::Connect(options);
  if (!client.ok()) {
    std::fprintf(stderr, "%s\n", client.status().ToString().c_str());
    return 1;
  }
  auto health = (*client)->Health();
  auto mem = (*client)->GetMemoryState();
  if (!health.ok() || !mem.ok()) {
    std::fprintf(stderr, "%s\n", (!health.ok() ? health.status() : mem.status()).ToString().c_str());
    return 1;
  }
  std::printf("health %s device %s budget_bytes %llu\n", fusion::ToString(*health),
              mem->device.kind.c_str(), static_cast<unsigned long long>(mem->device.budget_bytes));
  return 0;
}
