/// The frames of a write-ahead log as its bytes lay them out (https://www.sqlite.org/fileformat2.html#walformat): a
/// 32-byte header giving the page size, then frames of a 24-byte header and a page. Read without checking anything.
public struct WALFrames {
    public struct Frame {
        /// Where the frame starts in the file.
        public let offset: Int
        public let pageNumber: Int
        /// The frame ends a transaction (its "database size after commit" is not 0).
        public let isCommit: Bool
        /// Where its page starts in the file.
        public var pageOffset: Int { offset + 24 }
    }

    public let pageSize: Int
    public let frames: [Frame]

    public init(_ bytes: [UInt8]) {
        func word(_ offset: Int) -> Int {
            Int(bytes[offset]) << 24 | Int(bytes[offset + 1]) << 16 | Int(bytes[offset + 2]) << 8 | Int(bytes[offset + 3])
        }
        pageSize = bytes.count >= 32 ? word(8) : 0
        var frames: [Frame] = []
        var offset = 32
        while pageSize > 0 && offset + 24 + pageSize <= bytes.count {
            frames.append(Frame(offset: offset, pageNumber: word(offset), isCommit: word(offset + 4) != 0))
            offset += 24 + pageSize
        }
        self.frames = frames
    }

    /// The frame (numbered from 1) that ends the `commit`th transaction.
    public func frameEnding(commit: Int) -> Int? {
        var commits = 0
        for (index, frame) in frames.enumerated() where frame.isCommit {
            commits += 1
            if commits == commit { return index + 1 }
        }
        return nil
    }
}
