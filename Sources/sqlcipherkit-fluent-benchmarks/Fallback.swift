// Built when the package trait Examples is off (the default): App.swift is then empty, and this says how to build
// the real program.
#if !Examples
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

@main
enum TraitOffFallback {
    static func main() {
        let message = """
            sqlcipherkit-fluent-benchmarks is built only with the package trait Examples, which is off by default:
                swift run --traits Examples sqlcipherkit-fluent-benchmarks …
            (or --enable-all-traits; see Docs/Services.md)

            """
        _ = message.withCString { write(STDERR_FILENO, $0, strlen($0)) }
        exit(64)
    }
}
#endif
