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

    /// The 1-, 5- and 15-minute load averages: the VM may be shared with other jobs while measuring.
    static var loadAverage: String {
        var values = [Double](repeating: 0, count: 3)
        guard getloadavg(&values, 3) == 3 else { return "unknown" }
        return values.map { formatted($0, decimals: 2) }.joined(separator: " ")
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
    guard decimals > 0 else { return String(Int(rounded)) }
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
    let widths = [44, 10, 16, 7, 7, 8, 4]
    func line(_ cells: [String]) -> String {
        let text = zip(cells, widths).enumerated().map { index, pair in
            index == cells.count - 1 ? pair.0 : pair.0.padded(pair.1, right: index > 0)
        }.joined(separator: "  ")
        return String(text.reversed().drop(while: { $0 == " " }).reversed())
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
            measurement.targetRatio.map { "<= " + formatted($0, decimals: 2) + "x" } ?? "none",
            measurement.targetRatio == nil ? "" : measurement.meetsTarget ? "yes" : "NO",
        ]))
    }
    print("")
    print("ms: median of the timed iterations; ratio: SQLCipherKit median / raw median;")
    print("paired: median of the per-iteration ratios (raw and SQLCipherKit ran back to back; the decodable rows")
    print("share their raw runs, the three in rotating order). Spread (min..max ms):")
    for measurement in measurements {
        let raw = measurement.rawSeconds.map { $0 * 1000 }
        let wrapper = measurement.wrapperSeconds.map { $0 * 1000 }
        let rawRange = "\(formatted(raw.min() ?? 0, decimals: 1))..\(formatted(raw.max() ?? 0, decimals: 1))"
        let wrapperRange = "\(formatted(wrapper.min() ?? 0, decimals: 1))"
            + "..\(formatted(wrapper.max() ?? 0, decimals: 1))"
        print("  \(measurement.name): raw \(rawRange), SQLCipherKit \(wrapperRange)")
    }
}

// MARK: - Backup

/// Prints the backup benchmark's table: throughput of each contestant and its ratio to the raw C baseline doing the
/// same work.
func printBackupTable(
    _ measurement: BackupMeasurement, warmUpCount: Int, iterationCount: Int, setupSeconds: Double,
    totalSeconds: Double
) {
    let megabytes = Double(measurement.sourceByteCount) / 1e6
    print("Backup: \(formatted(megabytes, decimals: 1)) MB source (\(measurement.pageCount) pages of"
        + " \(measurement.pageSize) B) copied into a new file per run, deleted after it; MB = 10^6 bytes")
    print("  \(warmUpCount) warm-up + \(iterationCount) timed iterations, order of the three contestants rotated;"
        + " setup \(formatted(setupSeconds, decimals: 1)) s, backup benchmark in all"
        + " \(formatted(totalSeconds, decimals: 1)) s")
    print("")

    let widths = [66, 10, 7, 7, 7, 13]
    func line(_ cells: [String]) -> String {
        zip(cells, widths).enumerated().map { index, pair in
            index == cells.count - 1 ? pair.0 : pair.0.padded(pair.1, right: index > 0)
        }.joined(separator: "  ")
    }
    let targetRatio = 0.9
    /// A row; with a baseline, the throughput ratio (baseline time / this time) and the paired median of it.
    func row(_ label: String, _ seconds: [Double], baseline: [Double]? = nil, hasTarget: Bool = true) -> String {
        var cells = [
            "  " + label, formatted(Measurement.median(seconds) * 1000, decimals: 0),
            formatted(measurement.megabytesPerSecond(seconds), decimals: 1),
        ]
        if let baseline {
            let ratio = Measurement.median(baseline) / Measurement.median(seconds)
            let paired = Measurement.median(zip(baseline, seconds).map { $0 / $1 })
            cells += [formatted(ratio, decimals: 3) + "x", formatted(paired, decimals: 3) + "x"]
            let verdict = ratio >= targetRatio ? "yes" : "NO"
            cells.append(hasTarget ? ">= \(formatted(targetRatio, decimals: 2))x \(verdict)" : "none")
        } else {
            cells += ["base", "", ""]
        }
        return line(cells)
    }

    print(line(["what is timed", "median ms", "MB/s", "vs raw", "paired", "target"]))
    print(widths.map { String(repeating: "-", count: $0) }.joined(separator: "  "))
    print("copy only")
    print(row("raw C: open, sqlite3_key, backup_init, step(-1), finish, close", measurement.rawCopy))
    print(row(
        "SQLCipherKit backup(toPath:) to its last progress callback", measurement.wrapperToPathCopy,
        baseline: measurement.rawCopy))
    print(row(
        "SQLCipherKit backup(to: Connection) to its last progress callback", measurement.wrapperToConnectionCopy,
        baseline: measurement.rawCopy))
    print("copy + quick_check")
    print(row("raw C: copy, reopen, PRAGMA quick_check", measurement.rawCopyAndQuickCheck))
    print(row(
        "SQLCipherKit backup(to: Connection), whole call", measurement.wrapperToConnection,
        baseline: measurement.rawCopyAndQuickCheck))
    print("copy + verification + fsync + rename (what backup(toPath:) does)")
    print(row(
        "raw C: copy, quick_check, \(SQLCipher.supports(.cipherIntegrityCheck) ? "cipher_integrity_check, " : "")"
            + "fsync, rename", measurement.rawFull))
    print(row(
        "SQLCipherKit backup(toPath:), whole call", measurement.wrapperToPath, baseline: measurement.rawFull))
    print("whole call against the bare copy (no target: the call verifies the copy on top)")
    print(row(
        "SQLCipherKit backup(toPath:), whole call vs raw copy only", measurement.wrapperToPath,
        baseline: measurement.rawCopy, hasTarget: false))
    print("")

    func milliseconds(_ values: [Double]) -> String {
        let range = "\(formatted((values.min() ?? 0) * 1000, decimals: 0))"
            + "..\(formatted((values.max() ?? 0) * 1000, decimals: 0))"
        return "\(formatted(Measurement.median(values) * 1000, decimals: 0)) ms (\(range))"
    }
    print("vs raw: raw median time / SQLCipherKit median time (throughput ratio, higher is better); paired: median of")
    print("the per-iteration ratios. Phases, median (min..max):")
    print("  raw C: copy \(milliseconds(measurement.raw.map(\.copy))),"
        + " reopen + quick_check \(milliseconds(measurement.raw.map(\.quickCheck))),"
        + " cipher_integrity_check \(milliseconds(measurement.raw.map(\.integrityCheck))),"
        + " fsync + rename \(milliseconds(measurement.raw.map(\.syncAndRename)))")
    print("  backup(toPath:): copy \(milliseconds(measurement.wrapperToPathCopy)), after the copy"
        + " \(milliseconds(zip(measurement.wrapperToPath, measurement.wrapperToPathCopy).map { $0 - $1 }))")
    print("  backup(to: Connection): copy \(milliseconds(measurement.wrapperToConnectionCopy)), after the copy"
        + " \(milliseconds(zip(measurement.wrapperToConnection, measurement.wrapperToConnectionCopy).map { $0 - $1 }))")
}

// MARK: - Pool

/// Prints the pool benchmark's report: open latencies, read throughput by concurrency, write throughput.
func printPoolReport(
    _ measurement: PoolMeasurement, options: BenchmarkOptions, setupSeconds: Double, openSeconds: Double,
    totalSeconds: Double
) {
    func milliseconds(_ seconds: Double) -> String {
        formatted(seconds * 1000, decimals: seconds < 0.01 ? 3 : 1)
    }
    func summary(_ values: [Double]) -> String {
        "\(milliseconds(Measurement.median(values))) (\(milliseconds(values.min() ?? 0))"
            + "..\(milliseconds(values.max() ?? 0)), n=\(values.count))"
    }
    func line(_ label: String, _ value: String) -> String { "  " + label.padded(72) + "  " + value }

    let cache = measurement.cacheSize < 0 ? "\(-measurement.cacheSize) KiB" : "\(measurement.cacheSize) pages"
    print("Pools (DatabasePool, passphrase key, WAL): \(PoolBenchmark.rowCount)-row table"
        + " (\(measurement.pageCount) pages of \(measurement.pageSize) B), cache_size \(cache) per connection,"
        + " synchronous \(measurement.synchronous)")
    print("  setup \(formatted(setupSeconds, decimals: 1)) s, open latency \(formatted(openSeconds, decimals: 1)) s,"
        + " pool benchmark in all \(formatted(totalSeconds, decimals: 1)) s")
    print("")

    let nth = measurement.nthOpenSeconds
    let nthTarget = 0.001
    print("Open latency, ms: median (min..max, n); \(options.poolWarmUpCount) warm-up +"
        + " \(measurement.rounds) timed rounds, every kind of open in every round")
    print(line("Connection(path:key:), passphrase: SQLCipher's PBKDF2 at every open",
        summary(measurement.passphraseConnection)))
    print(line("DatabasePool(path:keyProvider:), passphrase: its first connection",
        summary(measurement.poolCreation)))
    print(line("Nth pool connection (readers 1-\(PoolBenchmark.openedReaderCount)): opening read - warm read",
        summary(nth) + "  target <= \(milliseconds(nthTarget)) ms: "
            + (Measurement.median(nth) <= nthTarget ? "yes" : "NO")))
    print(line("reference: Connection(path:key:), raw key", summary(measurement.rawKeyConnection)))
    print(line("reference: C API open, raw key (open, key, first query)",
        summary(measurement.rawKeyC)))
    let derivations = Set(measurement.derivationsPerPool).sorted().map(String.init).joined(separator: ", ")
    print("  key derivations by the library per pool (first connection + \(PoolBenchmark.openedReaderCount)"
        + " readers): \(derivations) (expected 1)")
    print("  per reader, median ms of the read that opens it / the same read once open / difference:")
    var perReader: [String] = []
    for index in 0..<PoolBenchmark.openedReaderCount {
        perReader.append("#\(index + 1) \(milliseconds(Measurement.median(measurement.openingRead[index])))"
            + "/\(milliseconds(Measurement.median(measurement.warmRead[index])))"
            + "/\(milliseconds(Measurement.median(measurement.readerOpenSeconds(index))))")
    }
    print("    " + perReader.prefix(4).joined(separator: "  "))
    print("    " + perReader.dropFirst(4).joined(separator: "  "))
    print("")

    let cpuCount = MachineDescription.processorCount
    print("Read throughput: point lookups by primary key, one read transaction each; reads/s, median of"
        + " \(options.poolThroughputRoundCount) runs of \(formatted(options.poolThroughputSeconds, decimals: 1)) s;"
        + " CPU: the process's CPU seconds per second; per CPU-s: reads/s / CPU; csw: voluntary context switches"
        + " per 1,000 reads")
    let widths = [12, 14, 8, 5, 10, 5, 14, 8, 5, 10, 5]
    func row(_ cells: [String]) -> String {
        zip(cells, widths).enumerated().map { index, pair in pair.0.padded(pair.1, right: index > 0) }
            .joined(separator: "  ")
    }
    print("  " + row([
        "readers", "threads (sync)", "scaling", "CPU", "per CPU-s", "csw", "tasks (async)", "scaling", "CPU",
        "per CPU-s", "csw",
    ]))
    func median(_ runs: [PoolBenchmark.Throughput]?, _ value: (PoolBenchmark.Throughput) -> Double) -> Double {
        Measurement.median((runs ?? []).map(value))
    }
    let baseThreads = median(measurement.readsOnThreads[1], \.operationsPerSecond)
    let baseTasks = median(measurement.readsInTasks[1], \.operationsPerSecond)
    for level in PoolBenchmark.concurrencyLevels {
        let threads = median(measurement.readsOnThreads[level], \.operationsPerSecond)
        let tasks = median(measurement.readsInTasks[level], \.operationsPerSecond)
        print("  " + row([
            "\(level)" + (level > cpuCount ? " (>\(cpuCount) CPU)" : ""), formatted(threads, decimals: 0),
            formatted(threads / baseThreads, decimals: 2) + "x",
            formatted(median(measurement.readsOnThreads[level], \.cpuCount), decimals: 2),
            formatted(median(measurement.readsOnThreads[level]) { $0.operationsPerSecond / $0.cpuCount }, decimals: 0),
            formatted(median(measurement.readsOnThreads[level], \.voluntarySwitchesPerThousand), decimals: 0),
            formatted(tasks, decimals: 0), formatted(tasks / baseTasks, decimals: 2) + "x",
            formatted(median(measurement.readsInTasks[level], \.cpuCount), decimals: 2),
            formatted(median(measurement.readsInTasks[level]) { $0.operationsPerSecond / $0.cpuCount }, decimals: 0),
            formatted(median(measurement.readsInTasks[level], \.voluntarySwitchesPerThousand), decimals: 0),
        ]))
    }
    let maximumLevel = PoolBenchmark.concurrencyLevels.max()!
    let taskShare = baseTasks / baseThreads
    let taskScaling = median(measurement.readsInTasks[maximumLevel], \.operationsPerSecond) / baseTasks
    let switchesPerRead = median(measurement.readsInTasks[1], \.voluntarySwitchesPerThousand) / 1000
    print("  async, 1 reader: \(formatted(taskShare, decimals: 2))x the threaded figure (target >= 0.70x:"
        + " \(taskShare >= 0.7 ? "yes" : "NO")); \(formatted(switchesPerRead, decimals: 3)) voluntary context"
        + " switches per read")
    let switchesPerReadAtMaximum =
        median(measurement.readsInTasks[maximumLevel], \.voluntarySwitchesPerThousand) / 1000
    print("  async, 1 to \(maximumLevel) readers: \(formatted(taskScaling, decimals: 2))x (target >= 1.50x:"
        + " \(taskScaling >= 1.5 ? "yes" : "NO")); \(formatted(switchesPerReadAtMaximum, decimals: 3)) voluntary"
        + " context switches per read with \(maximumLevel) tasks; the process used"
        + " \(formatted(median(measurement.readsInTasks[maximumLevel], \.cpuCount), decimals: 2)) of"
        + " \(cpuCount) CPUs (less than \(min(maximumLevel, cpuCount)) means another process took the rest, or"
        + " the readers slept)")
    print("")

    if !measurement.pointReadPool.isEmpty {
        var point = Measurement(
            name: "pool.read of one point lookup", rowCount: PoolBenchmark.pointReadCount, targetRatio: 1.3)
        point.rawSeconds = measurement.pointReadRaw
        point.wrapperSeconds = measurement.pointReadPool
        print("One point lookup per read transaction, one thread, \(PoolBenchmark.pointReadCount) lookups per pass,"
            + " \(point.rawSeconds.count) passes: DatabasePool.read (1 reader) against BEGIN; SELECT; COMMIT through"
            + " the C API (prepared once) on a connection to the same file")
        print("  raw C \(formatted(point.rawMedian * 1e6 / Double(point.rowCount), decimals: 2)) us per read,"
            + " pool.read \(formatted(point.wrapperMedian * 1e6 / Double(point.rowCount), decimals: 2)) us:"
            + " \(formatted(point.ratio, decimals: 3))x (paired \(formatted(point.pairedRatioMedian, decimals: 3))x);"
            + " target <= 1.30x: \(point.meetsTarget ? "yes" : "NO")")
        print("")
    }

    print("Write throughput: one-row UPDATE by primary key, one write transaction each (synchronous = FULL: one"
        + " fdatasync per commit); median of \(options.poolWriteRoundCount) runs of"
        + " \(formatted(options.poolWriteSeconds, decimals: 1)) s")
    func writeLine(_ label: String, _ runs: [PoolBenchmark.WriteRun]) -> String {
        let latencies = runs.flatMap(\.writeLatencies).sorted()
        func percentile(_ fraction: Double) -> Double {
            latencies.isEmpty ? .nan : latencies[min(latencies.count - 1, Int(Double(latencies.count) * fraction))]
        }
        var text = "  " + label.padded(34) + formatted(Measurement.median(runs.map(\.writesPerSecond)), decimals: 0)
            .padded(7, right: true) + " writes/s; ms per write: median \(milliseconds(percentile(0.5))),"
            + " p99 \(milliseconds(percentile(0.99))), max \(milliseconds(latencies.last ?? .nan));"
            + " CPU \(formatted(Measurement.median(runs.map(\.cpuCount)), decimals: 2))"
        let reads = Measurement.median(runs.map(\.readsPerSecond))
        if reads > 0 { text += "; \(formatted(reads, decimals: 0)) reads/s meanwhile" }
        return text
    }
    if let growing = measurement.writesGrowingWAL {
        print(writeLine("writer alone, new WAL file growing", [growing]))
    }
    print("  then one UPDATE of every row and a checkpoint: WAL file"
        + " \(formatted(Double(measurement.walByteCountAfterGrowth) / 1e6, decimals: 1)) MB,"
        + " rewritten in place from then on")
    print(writeLine("writer alone", measurement.writesAlone))
    print(writeLine("writer + \(PoolBenchmark.readerCountDuringWrites) reading threads", measurement.writesWithReaders))
}
