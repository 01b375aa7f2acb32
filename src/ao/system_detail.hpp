// Internal helpers shared by the system description files (system.cpp, system_json.cpp,
// system_moao.cpp, presets.cpp): number formatting for messages and the JSON paths of fields.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>

namespace halfscope::ao::detail {

/// Shortest text that reads back as the same double ("0.1", "1e-05", "nan", "inf"), for
/// messages: what was found must be shown exactly, not rounded to 6 digits.
[[nodiscard]] std::string format_number(double value);

/// JSON path of a sensor: "sensors[3]" for a measuring sensor, "truth" for the truth sensor
/// (index < 0).
[[nodiscard]] std::string sensor_path(std::int64_t index);

/// "<source>: <path>: expected <expected>, found <found>", the form of every validation message.
[[nodiscard]] std::string field_message(std::string_view source, std::string_view path,
                                        std::string_view expected, std::string_view found);

}  // namespace halfscope::ao::detail

namespace halfscope::ao {
struct AoSystem;
/// The JSON branch of read_ao_system (system_json.cpp): syntax errors and schema or validation
/// errors as IoError naming the file.
[[nodiscard]] AoSystem read_ao_system_json(const std::filesystem::path& path);
}  // namespace halfscope::ao
