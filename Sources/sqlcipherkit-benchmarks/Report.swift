import SQLCipherKit
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// What the figures were measured on.
enum MachineDescription {
    static var processorCount: Int { Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    /// The first `model name` of /proc/cpuinfo, or "unknown" (for example on macOS).
    static var cpuModel: String {
        guard let file = fopen("/proc/cpuinfo", "r") else { return "unknown" }
        defer { fclose(file) }
        var line: UnsafeMutablePointer<CChar>?
        var capacity = 0
        defer { free(line) }
        while getline(&line, &capacity, file) > 0, let line {
            let text = String(cString: line)
            if text.hasPrefix("model name"), let colon = text.firstIndex(of: ":") {
                return String(text[text.index(after: colon)...]).trimmed()
            }
        }
        return "unknown"
    }

    static var kernel: String {
        var name = utsname()
        guard uname(&name) == 0 else { return "unknown" }
        func text<T>(_ field: T) -> String {
            withUnsafeBytes(of: field) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
        }
        return "\(text(name.sysname)) \(text(name.release)) \(text(name.machine))"
    }
}

extension String {
    func trimmed() -> String {
        String(drop(while: { $0.isWhitespace }).reversed().drop(while: { $0.isWhitespace }).reversed())
    }

    func padded(_ width: Int, right: Bool = false) -> String {
        let padding = String(repeating: " ", count: max(0, width - count))
        return right ? padding + self : self + padding
    }
}

func formatted(_ value: Double, decimals: Int) -> String {
    var scale = 1.0
    for _ in 0..<decimals { scale *= 10 }
    let rounded = (value * scale).rounded() / scale
    var text = String(rounded)
    if let dot = text.firstIndex(of: ".") {
        let fraction = text[text.index(after: dot)...]
        text += String(repeating: "0", count: max(0, decimals - fraction.count))
    } else if decimals > 0 {
        text += "." + String(repeating: "0", count: decimals)
    }
    return text
}

/// Prints the results table.
func printTable(_ measurements: [Measurement]) {
    let header = ["benchmark", "raw C ms", "SQLCipherKit ms", "ratio", "paired", "target", "met"]
    let widths = [34, 10, 16, 7, 7, 8, 4]
    func line(_ cells: [String]) -> String {
        zip(cells, widths).enumerated().map { index, pair in
            index == cells.count - 1 ? pair.0 : pair.0.padded(pair.1, right: index > 0)
        }.joined(separator: "  ")
    }
    print(line(header))
    print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
    for measurement in measurements {
        print(line([
            measurement.name,
            formatted(measurement.rawMedian * 1000, decimals: 1),
            formatted(measurement.wrapperMedian * 1000, decimals: 1),
            formatted(measurement.ratio, decimals: 3) + "x",
            formatted(measurement.pairedRatioMedian, decimals: 3) + "x",
            "<= " + formatted(measurement.targetRatio, decimals: 2) + "x",
            measurement.meetsTarget ? "yes" : "NO",
        ]))
    }
    print("")
    print("ms: median of the timed iterations; ratio: SQLCipherKit median / raw median;")
    print("paired: median of the per-iteration ratios (raw and wrapper ran back to back). Spread (min..max ms):")
    for measurement in measurements {
        let raw = measurement.rawSeconds.map { $0 * 1000 }
        let wrapper = measurement.wrapperSeconds.map { $0 * 1000 }
        let rawRange = "\(formatted(raw.min() ?? 0, decimals: 1))..\(formatted(raw.max() ?? 0, decimals: 1))"
        let wrapperRange = "\(formatted(wrapper.min() ?? 0, decimals: 1))"
            + "..\(formatted(wrapper.max() ?? 0, decimals: 1))"
        print("  \(measurement.name): raw \(rawRange), SQLCipherKit \(wrapperRange)")
    }
}
