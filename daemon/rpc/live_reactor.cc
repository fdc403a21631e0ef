#include "rpc/live_reactor.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/status_macros.h"
#include "fusion_status.h"
#include "spdlog/spdlog.h"

namespace fusion {
namespace {

// How often the session thread looks at the daemon's stop flag while it waits for a frame.
constexpr absl::Duration kStopPoll = absl::Milliseconds(100);

double MsBetween(absl::Time a, absl::Time b) { return absl::ToDoubleMilliseconds(b - a); }

}  // namespace

LiveReactor* LiveReactor::Start(jobs::LiveRunner* runner, jobs::JobManager* jobs, MemfdRegistry* memfds,
                                LiveSessionRegistry* registry, Owner owner, std::unique_ptr<UidSlots::Slot> slot,
                                const std::atomic<bool>* stopping, uint64_t max_message_bytes) {
  auto* reactor =
      new LiveReactor(runner, jobs, memfds, std::move(owner), std::move(slot), stopping, max_message_bytes);
  {
    MutexLock lock(&reactor->mu_);
    reactor->entry_ = registry->Open(reactor->owner_, absl::Now());
  }
  reactor->StartRead(&reactor->in_);
  reactor->thread_ = std::thread([reactor] { reactor->Loop(); });
  return reactor;
}

absl::Status LiveReactor::CheckResultFits(const v1::LiveFrame& frame, uint64_t bytes, const char* how,
                                          const char* stage) const {
  // The rest of a result message (sequence, sizes, timings, stages) is well under this.
  constexpr uint64_t kResultFields = 64 << 10;
  if (bytes + kResultFields <= max_message_bytes_) return absl::OkStatus();
  return WithStage(absl::InvalidArgumentError(absl::StrCat(
                       "live frame (sequence ", frame.sequence(), "): its result, ", bytes, " bytes ", how,
                       ", is more than one message carries (max_message_bytes ", max_message_bytes_,
                       "): send smaller frames, or JPEG ones")),
                   stage);
}

void LiveReactor::OnReadDone(bool ok) {
  MutexLock lock(&mu_);
  changed_.SignalAll();
  if (!ok) {
    reads_done_ = true;
    return;
  }
  if (in_.has_open() && !opened_) {
    opened_ = true;
    open_ = std::move(*in_.mutable_open());
  } else if (in_.has_frame() && opened_) {
    ++received_;
    if (entry_ != nullptr) entry_->Received();
    if (waiting_.has_value()) {  // the newest frame wins
      ++dropped_;
      if (entry_ != nullptr) entry_->Dropped();
      Discard(waiting_->frame);
    }
    waiting_ = Waiting{std::move(*in_.mutable_frame()), absl::Now()};
  } else {
    protocol_ = absl::InvalidArgumentError(
        in_.has_open() ? "Live: a second open message (a session opens once)"
                       : in_.has_frame() ? "Live: a frame before the open message"
                                         : "Live: a request with neither open nor frame");
    reads_done_ = true;
    return;
  }
  in_.Clear();
  if (!finished_) StartRead(&in_);
}

void LiveReactor::OnWriteDone(bool ok) {
  MutexLock lock(&mu_);
  writing_ = false;
  if (!ok) write_failed_ = true;
  changed_.SignalAll();
}

void LiveReactor::OnCancel() {
  cancelled_flag_ = true;
  MutexLock lock(&mu_);
  cancelled_ = true;
  changed_.SignalAll();
}

void LiveReactor::OnDone() {
  // gRPC may run OnDone on the session thread itself (right after its Finish): then detach.
  if (thread_.get_id() == std::this_thread::get_id()) {
    thread_.detach();
  } else {
    thread_.join();
  }
  delete this;
}

void LiveReactor::Loop() {
  absl::Status st = Serve();  // the session, its leases with it, is gone when Serve returns
  {
    MutexLock lock(&mu_);
    // The code and our words (not the payloads: the stage is in the message's context).
    spdlog::info("live session {} of uid {} ended: {}{}{} ({} frames received, {} dropped)", owner_.job_id, owner_.uid,
                 st.ok() ? "OK" : absl::StatusCodeToString(st.code()), st.ok() ? "" : ": ", std::string(st.message()), received_,
                 dropped_);
  }
  {
    MutexLock lock(&mu_);
    finished_ = true;
    entry_.reset();  // on an error: the session and its leases are gone
    if (waiting_.has_value()) Discard(waiting_->frame);
    waiting_.reset();
  }
  Finish(ToGrpcStatus(st));  // unlocked: OnDone may run on this thread and delete the reactor
}

absl::Status LiveReactor::AwaitOpen(v1::LiveOpen* open) {
  MutexLock lock(&mu_);
  while (!open_.has_value() && !reads_done_ && !cancelled_ && !stopping_->load()) {
    changed_.WaitWithDeadline(&mu_, absl::Now() + kStopPoll);
  }
  if (cancelled_) return absl::CancelledError("Live: the client went away");
  if (!protocol_.ok()) return protocol_;
  if (!open_.has_value()) {
    return stopping_->load() ? absl::UnavailableError("fusiond is stopping")
                             : absl::InvalidArgumentError("Live: the stream ended before its open message");
  }
  *open = std::move(*open_);
  open_.reset();
  return absl::OkStatus();
}

absl::StatusOr<std::optional<LiveReactor::Waiting>> LiveReactor::NextFrame() {
  MutexLock lock(&mu_);
  while (!waiting_.has_value() && !reads_done_ && !cancelled_ && !stopping_->load()) {
    changed_.WaitWithDeadline(&mu_, absl::Now() + kStopPoll);
  }
  if (cancelled_) return absl::CancelledError("Live: the client went away");
  if (stopping_->load()) return absl::UnavailableError("fusiond is stopping");
  if (!protocol_.ok()) return protocol_;
  if (!waiting_.has_value()) return std::nullopt;  // half-closed, every frame taken
  std::optional<Waiting> next = std::move(waiting_);
  waiting_.reset();
  return next;
}

absl::Status LiveReactor::Write(v1::LiveResponse msg) {
  {
    MutexLock lock(&mu_);
    if (cancelled_ || write_failed_) return absl::CancelledError("Live: the client went away");
    writing_ = true;
  }
  out_ = std::move(msg);
  StartWrite(&out_);
  MutexLock lock(&mu_);
  while (writing_) changed_.WaitWithDeadline(&mu_, absl::InfiniteFuture());
  if (write_failed_) return absl::CancelledError("Live: the client went away");
  return absl::OkStatus();
}

absl::StatusOr<std::string> LiveReactor::Bytes(v1::ImageData* image, const std::string& what) {
  switch (image->source_case()) {
    case v1::ImageData::kInlineBytes:
      if (image->inline_bytes().empty()) break;
      return std::move(*image->mutable_inline_bytes());
    case v1::ImageData::kMemfd: {
      auto memfd = memfds_->Get(image->memfd().token(), owner_.uid);
      memfds_->Remove(image->memfd().token());
      if (!memfd.ok()) return WithStage(absl::InvalidArgumentError(absl::StrCat(what, ": ", memfd.status().message())), "decode");
      return std::string((*memfd)->bytes());
    }
    default:
      break;
  }
  return WithStage(absl::InvalidArgumentError(absl::StrCat(what, ": missing or empty")), "decode");
}

void LiveReactor::Discard(const v1::LiveFrame& frame) {
  if (frame.image().has_memfd()) memfds_->Remove(frame.image().memfd().token());
}

absl::Status LiveReactor::Serve() {
  v1::LiveOpen open;
  RETURN_IF_ERROR(AwaitOpen(&open));
  auto source = Bytes(open.mutable_source(), "source image");
  if (!source.ok()) return source.status();
  std::function<void()> give_way;  // the session's keyframe scans pause while live frames run
  if (jobs_ != nullptr) give_way = [jobs = jobs_] { jobs->GiveWayToLive(jobs::JobManager::kGiveWayMax); };
  auto session = runner_->OpenLive(owner_, *source, open.options(), [this] { return Stopped(); }, std::move(give_way));
  if (!session.ok()) return Stopped() ? StoppedStatus() : session.status();
  source->clear();
  spdlog::info("live session {} of uid {} open: {} models, {} bytes leased", owner_.job_id, owner_.uid,
               (*session)->models().size(), (*session)->model_bytes());
  v1::LiveResponse opened;
  opened.mutable_opened()->set_device((*session)->device());
  for (const std::string& m : (*session)->models()) opened.mutable_opened()->add_models(m);
  opened.mutable_opened()->set_model_bytes((*session)->model_bytes());
  {
    MutexLock lock(&mu_);
    entry_->Leased((*session)->device(), (*session)->models(), (*session)->model_bytes());
  }
  RETURN_IF_ERROR(Write(std::move(opened)));
  uint64_t returned = 0;
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<Waiting> next, NextFrame());
    if (!next.has_value()) break;
    const absl::Time began = absl::Now();
    v1::LiveResponse response;
    v1::LiveFrameResult* r = response.mutable_frame();
    auto bytes = Bytes(next->frame.mutable_image(), absl::StrCat("live frame (sequence ", next->frame.sequence(), ")"));
    if (!bytes.ok()) return bytes.status();
    if (next->frame.has_raw()) {
      const uint64_t raw = uint64_t{next->frame.raw().width()} * next->frame.raw().height() * 3;
      RETURN_IF_ERROR(CheckResultFits(next->frame, raw, "raw BGR", "decode"));
    }
    jobs::JobManager::LiveClaim claim;  // batch jobs yield while the frame runs
    if (jobs_ != nullptr) claim = jobs_->ClaimForLive();
    absl::Status st = (*session)->Frame(next->frame, *bytes, r);  // the one place a live frame runs
    claim.Release();
    if (!st.ok()) return Stopped() ? StoppedStatus() : st;
    RETURN_IF_ERROR(CheckResultFits(next->frame, r->image().size(), "encoded", "encode"));
    r->mutable_timings()->set_wait_ms(MsBetween(next->received, began));
    {
      MutexLock lock(&mu_);
      r->set_frames_dropped(dropped_);
    }
    const double total_ms = MsBetween(next->received, absl::Now());
    r->mutable_timings()->set_total_ms(total_ms);
    {
      // Listed as returned once handed to gRPC: before the client can see it (and ask).
      MutexLock lock(&mu_);
      entry_->Returned(total_ms);
    }
    RETURN_IF_ERROR(Write(std::move(response)));
    ++returned;
  }
  session->reset();  // the leases end before the summary goes out
  v1::LiveResponse summary;
  {
    MutexLock lock(&mu_);
    entry_.reset();  // and with them the session's listing
    summary.mutable_summary()->set_frames_received(received_);
    summary.mutable_summary()->set_frames_dropped(dropped_);
  }
  summary.mutable_summary()->set_frames_returned(returned);
  return Write(std::move(summary));
}

}  // namespace fusion
