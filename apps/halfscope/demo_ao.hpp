// The demo's adaptive-optics section (study 002, issue 5), made by demo_ao.cpp.
#pragma once

#include <filesystem>
#include <string>

namespace halfscope::cli {

struct Globals;

/// The check system end to end, measured now (seconds, on the device of the global --device):
/// Cmm / Ctm / Ctt generation (timed), a picture of log10 |Cmm|, R = Ctm Cmm^-1 in FP64, the
/// tomographic error, the Strehl ratio at H band (Marechal and OTF) and the PSF pictures. Writes
/// ao-cmm.png, ao-psf.png and ao-psf-diffraction.png into `dir` and returns the HTML of the section
/// that shows them. In a build without LAPACKE (HALFSCOPE_HAS_LAPACKE off) the reconstructor and
/// the scores are Unsupported: the section then shows the covariances (ao-cmm.png only) with a note
/// and warns on stderr. With `measure` false (`demo --no-measure`) nothing is computed or written
/// and the section says so.
/// The section ends with demo_ao_policies_section's.
std::string demo_ao_section(const Globals& g, const std::filesystem::path& dir,
                            bool measure = true);

/// "Reconstructor precision policies" (issue 6, demo_ao_policies.cpp): the mixed-precision
/// reconstructor per precision policy on the check system (and mid on a GPU), one run each through
/// `bench tor`'s code: a table of time, Strehl and Strehl difference to the FP64 reconstructor, and
/// two SVG charts. A failing policy is shown as failed. Returns its HTML (a short note when
/// `measure` is false or the build has no LAPACKE).
std::string demo_ao_policies_section(const Globals& g, bool measure);

}  // namespace halfscope::cli
