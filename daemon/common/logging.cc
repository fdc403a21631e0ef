#include "common/logging.h"

#include <cstdlib>

#include "spdlog/sinks/stdout_color_sinks.h"
#include "spdlog/sinks/systemd_sink.h"
#include "spdlog/spdlog.h"

namespace fusion {

void InitLogging(const std::string& level) {
  std::shared_ptr<spdlog::logger> logger;
  if (std::getenv("JOURNAL_STREAM") != nullptr) {
    // The journal stamps time and unit itself.
    logger = std::make_shared<spdlog::logger>("fusiond",
                                              std::make_shared<spdlog::sinks::systemd_sink_mt>());
    logger->set_pattern("%v");
  } else {
    logger = spdlog::stderr_color_mt("fusiond", spdlog::color_mode::automatic);
    logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  }
  logger->set_level(spdlog::level::from_str(level));
  spdlog::set_default_logger(logger);
}

void SetLogLevel(const std::string& level) {
  spdlog::default_logger()->set_level(spdlog::level::from_str(level));
}

}  // namespace fusion
