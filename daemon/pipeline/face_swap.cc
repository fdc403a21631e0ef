// SwapFaces (face_swap.h). No LibTorch in this TU: the stage computations are in stages.cc.
#include "pipeline/face_swap.h"

#include <opencv2/imgproc.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "models/blend/blend.h"
#include "geometry/frame_edge.h"
#include "pipeline/parallel.h"
#include "base/status_macros.h"

namespace fusion {

int EsrganHaloPx(const std::string& model) { return absl::StartsWith(model, "esrgan-slim-") ? 10 : 18; }

namespace {

std::vector<cv::Point2f> Points(const faceapi::Landmarks68& l) {
  std::vector<cv::Point2f> p;
  for (const faceapi::Point& q : l) p.emplace_back(q.x, q.y);
  return p;
}


// Frame pixels one face's simple blend holds at once: the hull's bounding box (landmarks' box
// within the frame) and the crop.
uint64_t BlendPixels(const models::BlendInput& in, cv::Size frame) {
  const cv::Rect box = cv::boundingRect(in.landmarks) & cv::Rect(0, 0, frame.width, frame.height);
  return static_cast<uint64_t>(box.area()) + in.fused_crop.total();
}

// Simple mode: the feather-blend model stage (at:: ops on the device, under the ladder), faces
// one at a time. Full mode: Poisson blending is a global solve, host code by design (HOST), faces
// with disjoint regions m.threads at once.
absl::Status BlendFaces(const FaceStages& m, const v1::JobOptions& o, const Picture& tgt,
                        const std::vector<SwapItem>& items, Execution& run, const FaceWork& work, cv::Mat* frame) {
  models::BlendOptions options;
  options.poisson_side = work.poisson_side;
  options.mode = o.simple() ? models::BlendMode::kSimple : models::BlendMode::kFull;
  options.colour_correction = !o.simple();
  std::vector<models::BlendInput> faces;
  uint64_t pixels = 1;
  for (const SwapItem& it : items) {
    faces.push_back({it.fused, it.target_crop, it.frame_to_crop, Points(tgt.faces[it.face].landmarks)});
    pixels = std::max(pixels, BlendPixels(faces.back(), frame->size()));
  }
  if (o.simple()) {
    uint64_t bucket = 1;  // estimates per power-of-two pixel count: faces differ in size
    while (bucket < pixels) bucket *= 2;
    return run.Stage("blend", m.blender, pixels, absl::StrCat("<=", bucket, "px"), 0.75f,
                     [&](const ModelCopy& c, int, const Checkpoint& cp) {
                       return BlendSimpleOnDevice(c, faces, options, frame, cp);
                     });
  }
  // Faces whose frame regions (hull box with the feather margin: all BlendFace reads and writes
  // of the frame) are disjoint are independent: blended at once, the bytes are those of the
  // faces in turn. Overlapping faces keep the order (a later face sees the earlier result).
  bool disjoint = true;
  std::vector<cv::Rect> regions;
  for (const models::BlendInput& f : faces) {
    const models::HullRegion h = models::FaceHullRegion(f.landmarks, frame->size(), models::FeatherRadiusPx(f.landmarks, options));
    for (const cv::Rect& r : regions) disjoint = disjoint && (r & h.ext).empty();
    regions.push_back(h.ext);
  }
  const int threads = disjoint ? m.threads : 1;
  return run.HostStage("blend", 0.75f, [&](const Checkpoint& cp) {
    return ParallelFor(faces.size(), threads, [&](size_t i) {
      RETURN_IF_ERROR(cp.Check("face", i, faces.size()));
      return models::BlendFace(faces[i], options, frame);
    });
  });
}

// The landmarks stage (faces one at a time: a stage's working set is that of one face) over the
// pictures not yet analysed, then the target's cut faces set aside (frame_edge.h). Without a
// prepared source, each cut face is a degradation and a target left without faces an error (a
// video frame's caller names them once per job, not per frame).
absl::Status LandmarkStage(const FaceStages& m, std::vector<Picture>& pics, Execution& run, const FaceWork& work) {
  Picture& tgt = pics[1];
  if (work.source_ready && work.target_ready) {
    SetAsideCutFaces(tgt, work.max_outside_share);
    return absl::OkStatus();
  }
  absl::Status st = run.Stage("landmarks", m.landmarks, 112 * 112, "112x112", 0.15f,
                              [&](const ModelCopy& c, int, const Checkpoint& cp) {
                                for (Picture& p : pics) {
                                  if (work.source_ready && &p != &tgt) continue;  // done once per job
                                  if (work.target_ready && &p == &tgt) continue;  // tracked
                                  if (p.analysed) continue;                        // from the face cache
                                  RETURN_IF_ERROR(FindLandmarks(c, p, cp.Within(p.what)));
                                }
                                return absl::OkStatus();
                              });
  if (!st.ok()) return st;
  SetAsideCutFaces(tgt, work.max_outside_share);
  if (!work.source_ready) {
    for (const CutFace& c : tgt.cut) run.Degrade(CutFaceNote(tgt.what, c.box, c.edges, c.outside_share));
    if (tgt.faces.empty()) {
      const CutFace& c = tgt.cut.front();
      return absl::FailedPreconditionError(absl::StrCat("no face of the ", tgt.what, " is inside the frame enough to swap: ",
                                                        CutFaceNote(tgt.what, c.box, c.edges, c.outside_share)));
    }
  }
  return absl::OkStatus();
}

// The encode stage: the source's descriptors (unless prepared or cached) and, swapping by
// reference, the reference's and the target's. No stage when there is nothing to describe.
absl::Status EncodeStage(const FaceStages& m, std::vector<Picture>& pics, Execution& run, const FaceWork& work) {
  Picture& src = pics[0];
  Picture& tgt = pics[1];
  const bool by_reference = pics.size() > 2;
  const bool describe_source = !work.source_ready && !src.analysed;
  const bool describe_reference = by_reference && !work.source_ready && !pics[2].analysed;
  if (!describe_source && !by_reference) return absl::OkStatus();
  return run.Stage("encode", m.encoder, 150 * 150, "150x150", 0.25f, [&](const ModelCopy& c, int, const Checkpoint& cp) {
    if (describe_source) {
      RETURN_IF_ERROR(DescribeFaces(c, src, {}, cp.Within(src.what)));
    }
    if (!by_reference) return absl::OkStatus();
    if (describe_reference) {
      RETURN_IF_ERROR(DescribeFaces(c, pics[2], {}, cp.Within(pics[2].what)));
    }
    return DescribeFaces(c, tgt, {}, cp.Within(tgt.what));
  });
}

// The generate stage over items, up to m.threads faces at once (admitted for that many); the
// source's notes become degradations.
absl::Status GenerateStage(const FaceStages& m, const v1::JobOptions& o, std::vector<Picture>& pics,
                           std::vector<SwapItem>& items, Execution& run) {
  std::vector<std::string> source_notes;
  // Faces at once: the working set of that many crops.
  const int gen_workers = WorkersFor(items.size(), m.threads);
  // The estimate's bucket names the face count: the crops of the faces done stay in the stage's
  // working set until it ends, so a learned 1-face peak under-admits 3 faces (a needless OOM retry).
  const std::string faces = items.size() > 1 ? absl::StrCat(", ", items.size(), " faces") : "";
  absl::Status st = run.Stage("generate", m.generator, kCropPixels * gen_workers,
                              absl::StrCat("256x256", gen_workers > 1 ? absl::StrCat(" x", gen_workers) : "", faces),
                              0.45f, [&](const ModelCopy& c, int, const Checkpoint& cp) {
                                return Generate(c, c.device, pics[0], pics[1], o.ratio(), items, cp, &source_notes,
                                                gen_workers);
                              });
  if (!st.ok()) return st;
  for (const std::string& note : source_notes) run.Degrade(note);
  return absl::OkStatus();
}

// The enhance stage (m.enhancer set): each fused crop enhanced, faces one at a time, then each
// item's target crop and transform brought to the enhanced size.
absl::Status EnhanceStage(const FaceStages& m, std::vector<SwapItem>& items, Execution& run) {
  int scale = 1;
  absl::Status st = run.Stage("enhance", m.enhancer, kCropPixels, "256x256", 0.6f,
                              [&](const ModelCopy& c, int tile, const Checkpoint& cp) {
                                std::vector<cv::Mat> up;
                                for (size_t i = 0; i < items.size(); ++i) {
                                  RETURN_IF_ERROR(cp.Check("face", i, items.size()));
                                  cv::Mat crop = items[i].fused.clone();
                                  const Checkpoint tiles = cp.Within(absl::StrCat("face ", i + 1, " of ", items.size()));
                                  RETURN_IF_ERROR(Enhance(c, c.device, tile, crop, tiles));
                                  up.push_back(crop);
                                }
                                for (size_t i = 0; i < items.size(); ++i) items[i].fused = up[i];
                                scale = EnhanceScale(c);
                                return absl::OkStatus();
                              },
                              // Tiles from half the 256-px crop down to 32 px: a 64-px tile of esrgan-slim-x4
                              // with its 10-px halo still peaks at about 72 MB (measured 673 MB untiled).
                              /*max_tile_px=*/128, /*min_tile_px=*/32, EsrganHaloPx(m.enhancer));
  if (!st.ok()) return st;
  for (SwapItem& it : items) {  // the target crop and transform at the enhanced size
    cv::resize(it.target_crop, it.target_crop, it.fused.size(), 0, 0, cv::INTER_CUBIC);
    it.frame_to_crop = it.frame_to_crop * static_cast<double>(scale);
  }
  return absl::OkStatus();
}

// The score stage: each swapped face described in the result `frame` and, unless the encode
// stage did it, in the target; the report's per-face entries and the count.
absl::Status ScoreStage(const FaceStages& m, const Picture& src, const Picture& tgt, const std::vector<SwapItem>& items,
                        const cv::Mat& frame, Execution& run, v1::JobResult& report, const FaceWork& work) {
  cv::Mat result_rgb;
  cv::cvtColor(frame, result_rgb, cv::COLOR_BGR2RGB);
  std::vector<FaceDescriptor> scored(items.size()), before(items.size());
  const int score_workers = WorkersFor(items.size(), m.threads);
  absl::Status st = run.Stage("score", m.encoder, 150 * 150 * score_workers,
                              score_workers > 1 ? absl::StrCat("150x150 x", score_workers) : "150x150", 0.85f,
                              [&](const ModelCopy& c, int, const Checkpoint& cp) {
    return ParallelFor(items.size(), score_workers, [&](size_t i) -> absl::Status {
      RETURN_IF_ERROR(cp.Check("face", i, items.size()));
      const DetectedFace& face = tgt.faces[items[i].face];
      RETURN_IF_ERROR(Describe(c, result_rgb, face.landmarks, &scored[i]));
      before[i] = face.descriptor;
      // A video frame's report keeps only the result's distances: the target is not described.
      if (face.described || work.target_ready) return absl::OkStatus();
      return Describe(c, tgt.rgb, face.landmarks, &before[i]);
    });
  });
  if (!st.ok()) return st;
  for (size_t i = 0; i < items.size(); ++i) {
    const faceapi::FaceBox& b = tgt.faces[items[i].face].box;
    v1::FaceReport* f = report.add_faces();
    for (float v : {b.x, b.y, b.w, b.h}) f->add_box(v);
    f->set_identity_distance(DescriptorDistance(scored[i], src.faces[0].descriptor));
    f->set_target_identity_distance(DescriptorDistance(before[i], src.faces[0].descriptor));
    f->set_score(b.score);
  }
  report.set_faces_swapped(static_cast<uint32_t>(items.size()));
  return absl::OkStatus();
}

}  // namespace

absl::Status SwapFaces(const FaceStages& m, const v1::JobOptions& o, std::vector<Picture>& pics, Execution& run,
                       v1::JobResult& report, cv::Mat* frame, const FaceWork& work) {
  Picture& tgt = pics[1];
  const bool by_reference = pics.size() > 2;
  RETURN_IF_ERROR(LandmarkStage(m, pics, run, work));
  RETURN_IF_ERROR(EncodeStage(m, pics, run, work));

  // The target's faces to swap: all, or (by reference) those within `limit` of the reference's.
  std::vector<SwapItem> items;
  const float limit = o.reference_max_distance() > 0 ? o.reference_max_distance() : 0.6f;
  for (size_t i = 0; i < tgt.faces.size(); ++i) {
    if (!by_reference || DescriptorDistance(tgt.faces[i].descriptor, pics[2].faces[0].descriptor) < limit) {
      items.push_back(SwapItem{.face = i});
    }
  }
  if (items.empty() && work.source_ready) {  // a video frame: passed through
    *frame = tgt.bgr;
    report.set_faces_swapped(0);
    return absl::OkStatus();
  }
  if (items.empty()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no face of the target image is within identity distance ", limit, " of the reference face"));
  }
  RETURN_IF_ERROR(GenerateStage(m, o, pics, items, run));
  if (!m.enhancer.empty()) {
    RETURN_IF_ERROR(EnhanceStage(m, items, run));
  }

  *frame = tgt.bgr.clone();
  RETURN_IF_ERROR(BlendFaces(m, o, tgt, items, run, work, frame));
  if (!work.score) {
    report.set_faces_swapped(static_cast<uint32_t>(items.size()));
    return absl::OkStatus();
  }
  return ScoreStage(m, pics[0], tgt, items, *frame, run, report, work);
}

}  // namespace fusion
