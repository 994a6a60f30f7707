/// The timings of one benchmark: raw C API and SQLCipherKit, measured alternately.
struct Measurement {
    let name: String
    let rowCount: Int
    /// The largest wrapper/raw ratio that meets the project's target; `nil` for a figure given for information.
    let targetRatio: Double?
    var rawSeconds: [Double] = []
    var wrapperSeconds: [Double] = []

    var rawMedian: Double { Self.median(rawSeconds) }
    var wrapperMedian: Double { Self.median(wrapperSeconds) }
    var ratio: Double { wrapperMedian / rawMedian }
    var meetsTarget: Bool { targetRatio.map { ratio <= $0 } ?? true }

    /// The median of the per-iteration ratios (each pair ran back to back), a cross-check on ``ratio``.
    var pairedRatioMedian: Double {
        Self.median(zip(wrapperSeconds, rawSeconds).map { $0 / $1 })
    }

    static func median(_ values: [Double]) -> Double {
        guard !values.isEmpty else { return .nan }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }
}

/// Seconds taken by `body`, on the monotonic clock.
@inline(never)
func measureSeconds(_ body: () throws -> Void) rethrows -> Double {
    let clock = ContinuousClock()
    let start = clock.now
    try body()
    let elapsed = clock.now - start
    return Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
}

/// Runs `raw` and `wrapper` `warmUpCount + iterationCount` times, alternating which goes first to cancel drift, and
/// records the timed iterations.
func compare(
    _ measurement: inout Measurement, warmUpCount: Int, iterationCount: Int,
    raw: (_ iteration: Int) throws -> Double, wrapper: (_ iteration: Int) throws -> Double
) throws {
    for iteration in 0..<(warmUpCount + iterationCount) {
        let rawFirst = iteration % 2 == 0
        let first = try rawFirst ? raw(iteration) : wrapper(iteration)
        let second = try rawFirst ? wrapper(iteration) : raw(iteration)
        guard iteration >= warmUpCount else { continue }
        measurement.rawSeconds.append(rawFirst ? first : second)
        measurement.wrapperSeconds.append(rawFirst ? second : first)
    }
}

/// Like ``compare(_:warmUpCount:iterationCount:raw:wrapper:)`` with two SQLCipherKit contestants timed against the
/// same raw runs (`first` and `second` get the same raw seconds); the order of the three rotates every iteration.
func compare(
    _ first: inout Measurement, _ second: inout Measurement, warmUpCount: Int, iterationCount: Int,
    raw: (_ iteration: Int) throws -> Double, first firstWrapper: (_ iteration: Int) throws -> Double,
    second secondWrapper: (_ iteration: Int) throws -> Double
) throws {
    for iteration in 0..<(warmUpCount + iterationCount) {
        var seconds: [Double] = [0, 0, 0]  // raw, first, second
        for step in 0..<3 {
            let contestant = (iteration + step) % 3
            switch contestant {
            case 0: seconds[0] = try raw(iteration)
            case 1: seconds[1] = try firstWrapper(iteration)
            default: seconds[2] = try secondWrapper(iteration)
            }
        }
        guard iteration >= warmUpCount else { continue }
        first.rawSeconds.append(seconds[0])
        first.wrapperSeconds.append(seconds[1])
        second.rawSeconds.append(seconds[0])
        second.wrapperSeconds.append(seconds[2])
    }
}

/// Runs the raw side and every SQLCipherKit contestant `warmUpCount + iterationCount` times, in an order rotated
/// every iteration, and returns one measurement per contestant, each against the same raw runs.
func compareRotating(
    _ measurements: [Measurement], warmUpCount: Int, iterationCount: Int,
    raw: (_ iteration: Int) throws -> Double, contestants: [(_ iteration: Int) throws -> Double]
) throws -> [Measurement] {
    precondition(measurements.count == contestants.count)
    var measurements = measurements
    let runnerCount = contestants.count + 1
    for iteration in 0..<(warmUpCount + iterationCount) {
        var seconds = Array(repeating: 0.0, count: runnerCount)
        for step in 0..<runnerCount {
            let contestant = (iteration + step) % runnerCount
            seconds[contestant] = try contestant == 0 ? raw(iteration) : contestants[contestant - 1](iteration)
        }
        guard iteration >= warmUpCount else { continue }
        for index in measurements.indices {
            measurements[index].rawSeconds.append(seconds[0])
            measurements[index].wrapperSeconds.append(seconds[index + 1])
        }
    }
    return measurements
}

extension Measurement {
    /// `self`'s SQLCipherKit times against `baseline`'s SQLCipherKit times (same iterations), e.g. by name against
    /// by index.
    func relative(to baseline: Measurement, name: String, targetRatio: Double?) -> Measurement {
        var relative = Measurement(name: name, rowCount: rowCount, targetRatio: targetRatio)
        relative.rawSeconds = baseline.wrapperSeconds
        relative.wrapperSeconds = wrapperSeconds
        return relative
    }
}
