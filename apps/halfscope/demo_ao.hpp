// The demo's adaptive-optics section (study 002, issue 5), made by demo_ao.cpp.
#pragma once

#include <filesystem>
#include <string>

namespace halfscope::cli {

struct Globals;

/// The check system end to end, measured now (seconds, CPU or GPU): Cmm / Ctm / Ctt generation
/// (timed), a picture of log10 |Cmm|, R = Ctm Cmm^-1 in FP64, the tomographic error, the Strehl
/// ratio at H band (Marechal and OTF) and the PSF picture. Writes ao-cmm.png and ao-psf.png into
/// `dir` and returns the HTML of the section that shows them.
std::string demo_ao_section(const Globals& g, const std::filesystem::path& dir);

}  // namespace halfscope::cli
